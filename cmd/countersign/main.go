// Command countersign: agents propose, humans countersign.
//
//	countersign serve          the service (REST, approval pages, Slack, MCP, workers)
//	countersign mcp            MCP over stdio, bridging to a running serve
//	countersign ops …          operator commands against the store
//	countersign keygen         a new principal API key and its hash
//	countersign check-config   validate a policy file and explain its routes
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `countersign: agents propose, humans countersign.

Usage:
  countersign serve                       run the service (development mode without COUNTERSIGN_CONFIG)
  countersign mcp                         MCP over stdio for hosts that spawn servers (needs COUNTERSIGN_URL, COUNTERSIGN_API_KEY)
  countersign ops list [--status S] [--principal P]
  countersign ops show KEY
  countersign ops cancel KEY
  countersign ops reconcile KEY --outcome succeeded|failed --note "what you checked"
  countersign keygen [--id NAME]          print a new API key and the hash for the config
  countersign check-config [FILE]         validate a policy file and print what each route resolves to

Configuration is read from the environment; see README.md.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv))
}

// run dispatches a subcommand and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, env, stderr)
	case "mcp":
		err = runMCP(ctx, env, stdin, stdout, stderr)
	case "ops":
		err = ops(ctx, args[1:], env, stdout)
	case "keygen":
		err = keygen(args[1:], stdout)
	case "check-config":
		err = checkConfig(args[1:], env, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "countersign: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "countersign %s: %v\n", args[0], err)
		return 1
	}
	return 0
}
