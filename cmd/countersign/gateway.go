package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/gateway"
	"github.com/countersign/countersign/mcpserver"
	"github.com/countersign/countersign/upstream"
)

// gatewayEffects wires the gateway (SPEC §12) where the policy file names
// upstreams: they are started now, each replica its own stdio processes
// (kept, restarted with backoff), and mcp.call is an action. An upstream
// that is down refuses only its own calls; a setting it needs that is
// missing (an ${ENV} reference) stops serve here.
func (m *Main) gatewayEffects(e *effects, file *config.File, _ bool) error {
	if len(file.Upstreams) == 0 {
		return nil
	}
	specs, err := upstreamSpecs(file, m.Env)
	if err != nil {
		return err
	}
	pool := upstream.New(specs, upstream.Options{Logger: m.log})
	pool.Start(context.Background())
	e.close = append(e.close, pool.Close)
	e.actions = append(e.actions, mcpcall.New(pool))
	e.pool = pool
	return nil
}

// upstreamSpecs turns the policy file's upstreams into the pool's, with
// their ${ENV} references expanded.
func upstreamSpecs(file *config.File, env func(string) (string, bool)) ([]upstream.Spec, error) {
	var out []upstream.Spec
	for _, u := range file.Upstreams {
		vars, headers, err := u.ResolveEnv(env)
		if err != nil {
			return nil, err
		}
		s := upstream.Spec{Name: u.Name, Command: u.Command, Env: vars, URL: u.URL, Headers: headers,
			Pass: u.Pass, Hide: u.Hide, MaxResultBytes: u.ResultLimit(), PassRate: u.Rate(), Timeout: u.CallTimeout(),
			State: map[string]upstream.StateRead{}}
		for tool, st := range u.State {
			s.State[tool] = upstream.StateRead{Tool: st.Tool, Args: st.Args, Diff: st.Diff}
		}
		out = append(out, s)
	}
	return out, nil
}

// gatewayFor is the gateway over svc, or nil where no upstream is
// configured.
func (e *effects) gatewayFor(svc *approval.Service) *gateway.Gateway {
	if e.pool == nil {
		return nil
	}
	if e.gw == nil {
		e.gw = gateway.New(svc, e.pool)
	}
	return e.gw
}

// callTool answers POST /v1/tools/call.
func callTool(gw *gateway.Gateway) func(context.Context, *approval.Principal, string, json.RawMessage) (json.RawMessage, error) {
	if gw == nil {
		return nil
	}
	return func(ctx context.Context, p *approval.Principal, name string, args json.RawMessage) (json.RawMessage, error) {
		o, err := gw.Call(ctx, p, name, args)
		if err != nil {
			return nil, err
		}
		return mcpserver.GatewayResult(o)
	}
}

// upstreamStatus reports the upstreams in /readyz.
func upstreamStatus(pool *upstream.Pool) func() any {
	if pool == nil {
		return nil
	}
	return func() any { return pool.Status() }
}

// upstreamListWait is how long check-config --upstreams waits for every
// upstream to list its tools.
const upstreamListWait = 30 * time.Second

// listUpstreams starts the file's upstreams, waits for their tool lists
// and prints every tool with what the gateway does with it. The names
// are the upstream's words: quoted where they hold anything but name
// characters. Returns an error naming the upstreams that could not be
// reached.
func listUpstreams(w io.Writer, file *config.File, env func(string) (string, bool)) error {
	specs, err := upstreamSpecs(file, env)
	if err != nil {
		return err
	}
	pool := upstream.New(specs, upstream.Options{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithTimeout(context.Background(), upstreamListWait)
	defer cancel()
	pool.Start(ctx)
	defer pool.Close()
	_ = pool.WaitListed(ctx)
	var down []string
	fmt.Fprintf(w, "\nMCP upstream tools:\n")
	for _, st := range pool.Status() {
		if !st.Up {
			down = append(down, st.Name)
			fmt.Fprintf(w, "  %s: DOWN (%s)\n", st.Name, st.Error)
			continue
		}
		fmt.Fprintf(w, "  %s: %d tools (%d pass, %d guarded, %d hidden)\n", st.Name, st.Tools, st.Pass, st.Guarded, st.Hidden)
		tools, err := pool.Tools(st.Name)
		if err != nil {
			continue
		}
		for _, t := range tools {
			switch {
			case t.Class == upstream.Hidden:
				fmt.Fprintf(w, "    %-40s hidden\n", showName(t.Name))
			case t.Exposed == "":
				fmt.Fprintf(w, "    %-40s not offered: %s\n", showName(t.Name), t.Why)
			default:
				fmt.Fprintf(w, "    %-40s %s\n", t.Exposed, t.Class)
			}
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("%d upstream(s) could not be reached: %s", len(down), strings.Join(down, ", "))
	}
	return nil
}

// showName is a tool name as the upstream gave it, quoted (escaped) when it
// holds anything but name characters.
func showName(s string) string {
	for _, r := range s {
		if !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}
