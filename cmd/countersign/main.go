// Command countersign: agents propose, humans countersign.
//
// This package is wiring only: root.go builds the command tree from one
// constructor per command (each in its own file), serve.go builds the
// service from the environment.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // approvers' time_zone works in images without zoneinfo
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv))
}
