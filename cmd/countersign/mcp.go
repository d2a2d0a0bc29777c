package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"runtime/debug"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runMCP is `countersign mcp`: the MCP tools over stdio for hosts that
// spawn servers (Claude Desktop, Claude Code, VS Code, Cursor), bridging
// to a running `countersign serve` over its REST API with the principal's
// API key. It reads only COUNTERSIGN_URL and COUNTERSIGN_API_KEY: it holds
// no Slack, SMTP, target or link secrets and never sees a capability.
// stdout carries the protocol only; logs go to stderr.
func runMCP(ctx context.Context, env func(string) (string, bool), stdin io.Reader, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
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

	// Say early, on stderr, whether the service answers and knows the key;
	// the host may start us before serve, so this only warns.
	go func() {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := c.List(pctx, approval.StatusDraft); err != nil {
			log.Warn("countersign is not usable yet; tools will report the error", "url", c.BaseURL(), "code", approval.ErrorCode(err), "err", err)
			return
		}
		log.Info("connected to countersign", "url", c.BaseURL())
	}()

	srv := mcpserver.NewServer(c, &mcpserver.Options{Version: buildVersion(), Logger: log})
	in, ok := stdin.(io.ReadCloser)
	if !ok {
		in = io.NopCloser(stdin)
	}
	err = srv.Run(ctx, &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{stdout}})
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

// buildVersion is the module version the binary was built from, or "dev".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
