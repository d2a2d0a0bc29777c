package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/mcpserver"
	"github.com/spf13/cobra"
)

func init() { register(newMCPCmd) }

func newMCPCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "MCP over stdio for hosts that spawn servers, bridging to a running serve",
		Long: `countersign mcp speaks MCP over stdin/stdout for hosts that start a process
(Claude Desktop, Claude Code, VS Code, Cursor) and calls a running countersign serve
over its REST API with the principal's API key. It reads only two variables:

  COUNTERSIGN_URL       where serve is, e.g. http://127.0.0.1:8080
  COUNTERSIGN_API_KEY   the agent's API key (serve prints dev-agent's in development mode)

It holds no Slack, SMTP, target or link secrets. Logs go to stderr.`,
		Example: `  COUNTERSIGN_URL=http://127.0.0.1:8080 COUNTERSIGN_API_KEY=cs_… countersign mcp`,
		Args:    argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMCP(cmd.Context(), c.env, c.stdin, c.stdout, c.stderr)
		},
	}
}

// runMCP is `countersign mcp`: the MCP tools over stdio for hosts that
// spawn servers (Claude Desktop, Claude Code, VS Code, Cursor), bridging
// to a running `countersign serve` over its REST API with the principal's
// API key. It reads only COUNTERSIGN_URL and COUNTERSIGN_API_KEY: it holds
// no Slack, SMTP, target or link secrets and never sees a capability.
// stdout carries the protocol only; logs go to stderr.
func runMCP(ctx context.Context, env func(string) (string, bool), stdin io.Reader, stdout, stderr io.Writer) error {
	log := newLogger(stderr)
	base, _ := env("COUNTERSIGN_URL")
	key, _ := env("COUNTERSIGN_API_KEY")
	if base == "" {
		return errors.New("COUNTERSIGN_URL is not set: point it at a running countersign serve, e.g. http://127.0.0.1:8080")
	}
	if key == "" {
		return errors.New("COUNTERSIGN_API_KEY is not set: use the agent's API key (countersign serve prints one in development mode)")
	}
	c, err := client.New(base, key, &client.Options{UserAgent: "countersign-mcp/" + buildVersion()})
	if err != nil {
		return err
	}
	if u, _ := url.Parse(c.BaseURL()); u != nil && u.Scheme == "http" && !loopback(u.Hostname()) {
		log.Warn("COUNTERSIGN_URL is plain http to another host: the API key crosses the network unencrypted; use https", "url", c.BaseURL())
	}

	// List only the tools the service serves (GET /v1/tools), and say on
	// stderr whether it answers and knows the key. The host may start us
	// before serve: then every tool is listed, and each reports the error.
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	tools, err := c.Tools(pctx)
	cancel()
	if err != nil {
		log.Warn("countersign is not usable yet; listing every tool, and tools will report the error", "url", c.BaseURL(), "code", approval.ErrorCode(err), "err", err)
		tools = nil
	} else {
		log.Info("connected to countersign", "url", c.BaseURL(), "tools", len(tools))
	}

	srv := mcpserver.NewServer(c, &mcpserver.Options{Version: buildVersion(), Logger: log, Tools: tools})
	in, ok := stdin.(io.ReadCloser)
	if !ok {
		in = io.NopCloser(stdin)
	}
	// The task layer (MCP tasks, SPEC §13) sits between stdio and the server.
	err = srv.Run(ctx, mcpserver.StdioTransport(c, in, nopWriteCloser{stdout}, log))
	switch {
	case err == nil, errors.Is(err, io.EOF), ctx.Err() != nil:
		return nil // the host closed stdin, or we were told to stop
	}
	return fmt.Errorf("mcp: %w", err)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
