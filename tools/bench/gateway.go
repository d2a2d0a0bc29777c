package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway phase (SPEC §12, BENCHMARKS.md): a pass-through call of an
// upstream MCP server's tool through countersign against the same call
// made directly, by the same Go MCP client, in one run. Direct: the client
// spawns the upstream and calls it over stdio. Through countersign: the
// client calls NAME__TOOL on /mcp (streamable HTTP, stateless, JSON
// responses) of countersign serve, which calls its own stdio process of
// the same upstream. One call at a time, alternating rounds, so that both
// see the same machine.

// gatewayRun is one side's latencies and CPU.
type gatewayRun struct {
	lat            []time.Duration
	serverCPU      time.Duration // countersign serve (through only)
	upstreamCPU    time.Duration // the upstream's process
	clientCPU      time.Duration // this process (the MCP client)
	calls          int
	errors, misses int
}

func (b *bench) gateway(ctx context.Context) error {
	if b.o.upstream == "" {
		return fmt.Errorf("gateway phase: -upstream is required (scripts/bench.sh builds hostile-upstream)")
	}
	dir := filepath.Join(b.dir, "gateway")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "note"), []byte("a short note, as a read tool returns it\n"), 0o600); err != nil {
		return err
	}
	rdb, err := startRedis(b.o.redisServer, b.dir)
	if err != nil {
		return err
	}
	b.stops = append(b.stops, rdb.stop)
	svc, err := b.startGatewayService(dir, rdb)
	if err != nil {
		return err
	}
	b.stops = append(b.stops, svc.stop)

	// Direct: the client spawns the upstream itself.
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx,
		&mcp.CommandTransport{Command: exec.Command(b.o.upstream, "-dir", dir)}, nil)
	if err != nil {
		return fmt.Errorf("connect to the upstream: %w", err)
	}
	defer direct.Close()
	through, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + svc.addr + "/mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{key: b.key}}}, nil)
	if err != nil {
		return fmt.Errorf("connect to countersign /mcp: %w", err)
	}
	defer through.Close()
	directPid, err := upstreamPid(ctx, direct, "pid")
	if err != nil {
		return err
	}
	throughPid, err := upstreamPid(ctx, through, "notes__pid")
	if err != nil {
		return err
	}
	n := b.o.gatewayN
	var d, t gatewayRun
	// Warm both paths (connections, the SDK's schema caches).
	_ = gatewayCalls(ctx, direct, "read_note", 50, 0, 0, &gatewayRun{})
	_ = gatewayCalls(ctx, through, "notes__read_note", 50, 0, 0, &gatewayRun{})
	// With -profile, countersign's CPU profile covers the last rounds of
	// calls through it (it lasts -duration).
	stop := b.profileIf(b.o.profile, svc, "gateway")
	defer stop()
	for round := 0; round < b.o.rounds*2; round++ {
		if err := gatewayCalls(ctx, direct, "read_note", n/(b.o.rounds*2), directPid, 0, &d); err != nil {
			return err
		}
		if err := gatewayCalls(ctx, through, "notes__read_note", n/(b.o.rounds*2), throughPid, svc.cmd.Process.Pid, &t); err != nil {
			return err
		}
	}
	b.rep.gateway = &gatewayReport{direct: d, through: t}
	return nil
}

// startGatewayService runs countersign serve with one upstream, notes,
// whose read_note passes.
func (b *bench) startGatewayService(dir string, rdb *redisProc) (*service, error) {
	cfg := filepath.Join(dir, "gateway.yaml")
	cmd, _ := json.Marshal([]string{b.o.upstream, "-dir", dir})
	policy := fmt.Sprintf(`principals:
  - id: bench-agent
    api_key_sha256: %q
    scopes: ["mcp:notes"]
    quotas: {requests_per_minute: 1000000000}
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com}
routes:
  - {name: bench, match: {action: mcp.call}, approvers: {ids: [grace]}, notify: [console]}
upstreams:
  - name: notes
    command: %s
    pass: [read_note, pid]
    pass_rate: 10000
`, b.keyHash, cmd)
	if err := os.WriteFile(cfg, []byte(policy), 0o600); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"COUNTERSIGN_CONFIG="+cfg, "COUNTERSIGN_REDIS_URL="+rdb.url(), "COUNTERSIGN_LISTEN="+addr,
		"COUNTERSIGN_REDIS_MIN_REPLICAS=0",
		"COUNTERSIGN_LINK_KEYS=k1:"+randomB64(32), "COUNTERSIGN_RECEIPT_KEYS=r1:"+randomB64(32),
		"COUNTERSIGN_AUDIT_FILE="+filepath.Join(dir, "audit.jsonl"))
	s := &service{addr: addr}
	if b.o.profile {
		if s.debug, err = freeAddr(); err != nil {
			return nil, err
		}
		env = append(env, "COUNTERSIGN_DEBUG_LISTEN="+s.debug)
	}
	if s.proc, err = startProc("gateway-serve", b.dir, env, b.o.countersign, "serve"); err != nil {
		return nil, err
	}
	if err := waitHTTP(s.proc, addr, "/readyz"); err != nil {
		s.stop()
		return nil, err
	}
	// Ready is the store; the upstream lists its tools right after.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			var body struct {
				Upstreams []struct {
					Up bool `json:"up"`
				} `json:"upstreams"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if len(body.Upstreams) == 1 && body.Upstreams[0].Up {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("the upstream never came up (see %s)", s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type bearer struct{ key string }

func (t bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.key)
	return http.DefaultTransport.RoundTrip(r)
}

// upstreamPid asks the hostile upstream for its process id (its pid tool).
func upstreamPid(ctx context.Context, cs *mcp.ClientSession, tool string) (int, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", tool, err)
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			if pid, err := strconv.Atoi(strings.TrimSpace(tc.Text)); err == nil {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("%s: no pid in its answer", tool)
}

// gatewayCalls makes n calls one at a time and adds their latencies and
// the CPU the processes spent to r.
func gatewayCalls(ctx context.Context, cs *mcp.ClientSession, tool string, n, upstreamPid, serverPid int, r *gatewayRun) error {
	args := map[string]any{"name": "note"}
	up0, sv0, cl0 := procCPU(upstreamPid), procCPU(serverPid), selfCPU()
	for range n {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		el := time.Since(start)
		if err != nil {
			return fmt.Errorf("%s: %w", tool, err)
		}
		if res.IsError {
			r.errors++
		} else if len(res.Content) == 0 {
			r.misses++
		}
		r.lat = append(r.lat, el)
	}
	if upstreamPid > 0 {
		r.upstreamCPU += procCPU(upstreamPid) - up0
	}
	if serverPid > 0 {
		r.serverCPU += procCPU(serverPid) - sv0
	}
	r.clientCPU += selfCPU() - cl0
	r.calls += n
	return nil
}

type gatewayReport struct{ direct, through gatewayRun }

func (g *gatewayReport) print(w io.Writer) {
	d, t := g.direct, g.through
	per := func(c time.Duration, n int) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f µs", float64(c.Microseconds())/float64(n))
	}
	fmt.Fprintf(w, "\ngateway: a pass tool (read_note of hostile-upstream over stdio), one call at a time, %d calls each way:\n", d.calls)
	fmt.Fprintf(w, "  %-28s %10s %10s %10s %16s %16s %14s\n", "", "p50", "p90", "p99", "countersign CPU", "upstream CPU", "client CPU")
	fmt.Fprintf(w, "  %-28s %10s %10s %10s %16s %16s %14s\n", "direct (client → stdio)",
		ms(pct(d.lat, 50)), ms(pct(d.lat, 90)), ms(pct(d.lat, 99)),
		"-", per(d.upstreamCPU, d.calls), per(d.clientCPU, d.calls))
	fmt.Fprintf(w, "  %-28s %10s %10s %10s %16s %16s %14s\n", "through countersign (/mcp)",
		ms(pct(t.lat, 50)), ms(pct(t.lat, 90)), ms(pct(t.lat, 99)),
		per(t.serverCPU, t.calls), per(t.upstreamCPU, t.calls), per(t.clientCPU, t.calls))
	fmt.Fprintf(w, "  added by countersign: p50 %s, p99 %s; countersign CPU per call %s (CPU figures in 10 ms ticks over all calls)\n",
		ms(pct(t.lat, 50)-pct(d.lat, 50)), ms(pct(t.lat, 99)-pct(d.lat, 99)),
		per(t.serverCPU, t.calls))
	if d.errors+t.errors+d.misses+t.misses > 0 {
		fmt.Fprintf(w, "  errors: direct %d, through %d; empty results: %d, %d\n", d.errors, t.errors, d.misses, t.misses)
	}
}

// ms formats milliseconds as the report's other latencies.
func ms(v float64) string { return fmt.Sprintf("%.3f ms", v) }
