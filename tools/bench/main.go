// Command bench measures countersign on this machine against the limit of
// its own architecture, in one run: it starts a private redis-server,
// countersign serve and a limit handler (fiber, the same bearer check and
// JSON decoding, one Redis script per request; see limit.go) on loopback,
// and drives them alternately (limit, countersign, limit, countersign…)
// so that both see the same machine. It reports p50/p99 and throughput
// of prepare and of the full loop (prepare → send → notification → page
// GET → approve POST → email.send into an SMTP sink → the agent sees
// succeeded), the latencies inside the loop (send → notification,
// long-poll wake after the decision, click → SMTP accept), the Redis round
// trips of each request (MONITOR), and Redis memory per pending operation
// and per draft with a 1 KiB input.
//
// Run it through scripts/bench.sh, which builds countersign first.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/valyala/fasthttp"
)

type options struct {
	countersign, redisServer string
	duration                 time.Duration
	rounds, conns, loopConns int
	latencyN, memN           int
	park                     time.Duration
	memRandom, memExpiry     bool
	phases                   string
	outDir                   string
	clusterShards            string
	clusterPrincipals        int
	profile                  bool
	redisConfig              string
	upstream                 string
	gatewayN                 int
}

func main() {
	var o options
	limitMode := flag.Bool("limit-handler", false, "run the limit handler (used by the bench itself)")
	listen := flag.String("listen", "", "limit handler: listen address")
	redisURL := flag.String("redis", "", "limit handler: Redis URL")
	keyHash := flag.String("key-sha256", "", "limit handler: hex SHA-256 of the agent's API key")
	flag.StringVar(&o.countersign, "countersign", "", "the countersign binary to measure (scripts/bench.sh builds it)")
	flag.StringVar(&o.redisServer, "redis-server", "redis-server", "the redis-server binary")
	flag.DurationVar(&o.duration, "duration", 8*time.Second, "length of each measured run")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds of limit / prepare / loop, alternating")
	flag.IntVar(&o.conns, "c", 32, "connections for prepare and the limit handler")
	flag.IntVar(&o.loopConns, "loop-c", 16, "concurrent loops in the loop throughput run")
	flag.IntVar(&o.latencyN, "latency-n", 300, "loops, one at a time, for the latency figures")
	flag.DurationVar(&o.park, "park", 20*time.Millisecond, "latency loops: the human's pause between opening the page and approving")
	flag.IntVar(&o.memN, "mem-n", 2000, "operations for each memory figure")
	flag.BoolVar(&o.memRandom, "mem-random", false, "memory: incompressible (random) input text instead of prose")
	flag.BoolVar(&o.memExpiry, "mem-expiry", true, "memory: wait for the drafts to expire (draft_ttl 1m) and measure what is left")
	flag.StringVar(&o.phases, "phases", "throughput,latency,trips,memory", "which parts to run (also: cluster, loops on a 3-master Redis Cluster for each -cluster-shards; gateway, a pass-through MCP call through countersign against the same call made directly)")
	flag.StringVar(&o.clusterShards, "cluster-shards", "1,16", "cluster phase: the shard counts to measure, each on a fresh 3-master cluster state")
	flag.IntVar(&o.clusterPrincipals, "cluster-principals", 8, "cluster phase: agents (principals) the loops are spread over")
	flag.StringVar(&o.outDir, "out", "", "directory for logs and CPU profiles (default: a temporary one, removed)")
	flag.BoolVar(&o.profile, "profile", false, "take CPU profiles of countersign during the last round's prepare and loop runs")
	flag.StringVar(&o.redisConfig, "redis-config", "", `settings for the bench's redis-servers, as in redis.conf: "name value name value …"`)
	flag.StringVar(&o.upstream, "upstream", "", "gateway phase: the hostile-upstream binary (scripts/bench.sh builds it)")
	flag.IntVar(&o.gatewayN, "gateway-n", 4000, "gateway phase: pass-through calls each way")
	timeout := flag.Duration("timeout", 20*time.Minute, "stop everything after this long")
	flag.Parse()
	if *limitMode {
		runLimitHandler(*listen, *redisURL, *keyHash)
		return
	}
	if o.countersign == "" {
		log.Fatal("bench: -countersign is required (use scripts/bench.sh)")
	}
	b := &bench{o: o}
	defer b.cleanup()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
			log.Print("bench: interrupted; stopping what it started")
		case <-time.After(*timeout):
			log.Printf("bench: still running after %s; stopping what it started", *timeout)
		}
		b.cleanup()
		os.Exit(2)
	}()
	if err := b.run(); err != nil {
		b.cleanup()
		log.Fatalf("bench: %v", err)
	}
}

type bench struct {
	o        options
	dir      string
	ownDir   bool
	stops    []func()
	key      string
	keyHash  string
	rep      report
	stopOnce bool
	mu       sync.Mutex // guards rep.profiles, appended to by the profilers
}

func (b *bench) cleanup() {
	if b.stopOnce {
		return
	}
	b.stopOnce = true
	for i := len(b.stops) - 1; i >= 0; i-- {
		b.stops[i]()
	}
	if b.ownDir {
		os.RemoveAll(b.dir)
	}
}

func (b *bench) has(phase string) bool {
	for _, p := range strings.Split(b.o.phases, ",") {
		if strings.TrimSpace(p) == phase {
			return true
		}
	}
	return false
}

func (b *bench) run() error {
	ctx := context.Background()
	b.dir = b.o.outDir
	if b.dir == "" {
		d, err := os.MkdirTemp("", "countersign-bench-")
		if err != nil {
			return err
		}
		b.dir, b.ownDir = d, true
	} else if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return err
	}
	b.key, b.keyHash = newAPIKey()
	b.rep.machine = machine(b.o.redisServer)
	b.rep.o = b.o
	pt, err := startParties()
	if err != nil {
		return err
	}
	b.stops = append(b.stops, pt.close)

	if b.has("throughput") || b.has("latency") || b.has("trips") {
		if err := b.main(ctx, pt); err != nil {
			return err
		}
	}
	if b.has("memory") {
		if err := b.memory(ctx, pt); err != nil {
			return err
		}
	}
	if b.has("cluster") {
		if err := b.cluster(ctx, pt); err != nil {
			return err
		}
	}
	if b.has("gateway") {
		if err := b.gateway(ctx); err != nil {
			return err
		}
	}
	b.rep.print(os.Stdout)
	return nil
}

// main runs the throughput rounds, the latency loops and the round-trip
// count on one redis-server shared by countersign and the limit handler.
func (b *bench) main(ctx context.Context, pt *parties) error {
	r, err := startRedis(b.o.redisServer, b.dir, b.o.redisArgs()...)
	if err != nil {
		return err
	}
	b.stops = append(b.stops, r.stop)
	svc, err := startService(b.o.countersign, b.dir, "countersign", r, pt, b.keyHash, "15m", b.o.profile)
	if err != nil {
		return err
	}
	b.stops = append(b.stops, svc.stop)
	cs := newClient(svc.addr, b.key, 4*max(b.o.conns, b.o.loopConns))

	if b.has("throughput") {
		lim, limAddr, err := startLimit(b.dir, r, b.keyHash)
		if err != nil {
			return err
		}
		b.stops = append(b.stops, lim.stop)
		lc := newClient(limAddr, b.key, 2*b.o.conns)
		loops := &looper{c: cs, pt: pt}
		// Warm-up: connections, scripts, consumer groups, the Go runtime.
		prepareRun("warm-up", lc, b.o.conns, time.Second)
		prepareRun("warm-up", cs, b.o.conns, time.Second)
		if _, _, _, err := loops.loops(b.o.loopConns, time.Second, 0); err != nil {
			return fmt.Errorf("warm-up loops: %w", err)
		}
		if err := settle(ctx, r); err != nil {
			return err
		}
		for round := 1; round <= b.o.rounds; round++ {
			last := round == b.o.rounds && b.o.profile && svc.debug != ""
			var rd roundResult
			m, cs0 := startMeter(lim.cmd.Process.Pid, r.cmd.Process.Pid), commandStats(r)
			rd.limit = prepareRun("limit handler", lc, b.o.conns, b.o.duration)
			rd.limitCPU, rd.limitRedis = m.stop(), commandStats(r).top(cs0, 6, rd.limit.N)
			if err := settle(ctx, r); err != nil {
				return err
			}
			stopProf := b.profileIf(last, svc, "prepare")
			m, cs0 = startMeter(svc.cmd.Process.Pid, r.cmd.Process.Pid), commandStats(r)
			rd.prepare = prepareRun("countersign prepare", cs, b.o.conns, b.o.duration)
			rd.prepareCPU, rd.prepareRedis = m.stop(), commandStats(r).top(cs0, 10, rd.prepare.N)
			stopProf()
			rd.prepareBacklog, rd.prepareDrain, err = drain(ctx, r)
			if err != nil {
				return err
			}
			stopProf = b.profileIf(last, svc, "loop")
			stopSelf := b.profileSelf(last, "bench-loop")
			m, cs0 = startMeter(svc.cmd.Process.Pid, r.cmd.Process.Pid), commandStats(r)
			samples, elapsed, errs, first := loops.loops(b.o.loopConns, b.o.duration, 0)
			rd.loopCPU, rd.loopRedis = m.stop(), commandStats(r).top(cs0, 12, len(samples))
			stopSelf()
			stopProf()
			if errs > 0 {
				return fmt.Errorf("loop run: %d failures; first: %v", errs, first)
			}
			rd.loops, rd.loopElapsed = samples, elapsed
			rd.loopBacklog, rd.loopDrain, err = drain(ctx, r)
			if err != nil {
				return err
			}
			if rd.limit.Errors > 0 || rd.prepare.Errors > 0 {
				return fmt.Errorf("round %d: %d limit and %d prepare failures; first: %v %v", round,
					rd.limit.Errors, rd.prepare.Errors, rd.limit.First, rd.prepare.First)
			}
			b.rep.rounds = append(b.rep.rounds, rd)
			log.Printf("bench: round %d: limit %.0f/s, prepare %.0f/s, loops %.0f/s", round, rd.limit.Rate(),
				rd.prepare.Rate(), float64(len(samples))/elapsed.Seconds())
		}
		lim.stop()
	}
	if b.has("latency") {
		l := &looper{c: cs, pt: pt, park: b.o.park}
		samples, _, errs, first := l.loops(1, 0, b.o.latencyN)
		if errs > 0 {
			return fmt.Errorf("latency loops: %d failures; first: %v", errs, first)
		}
		b.rep.latency = samples
	}
	if b.has("trips") {
		t, err := countTrips(r.addr, cs, pt)
		if err != nil {
			return err
		}
		b.rep.trips = t
	}
	svc.stop()
	r.stop()
	return nil
}

// memory measures on a service and redis-server of their own, so that
// INFO memory counts nothing else: once with Redis's defaults and once as
// countersign advises (store.CompactHashValue); the drafts' expiry, which
// does not depend on it, only the second time.
func (b *bench) memory(ctx context.Context, pt *parties) error {
	advised := []string{"--hash-max-listpack-value", strconv.Itoa(store.CompactHashValue)}
	for i, cfg := range []struct {
		name string
		args []string
	}{
		{"Redis's defaults", b.o.redisArgs()},
		{"hash-max-listpack-value " + strconv.Itoa(store.CompactHashValue) + ", as countersign advises", append(b.o.redisArgs(), advised...)},
	} {
		r, err := startRedis(b.o.redisServer, b.dir, cfg.args...)
		if err != nil {
			return err
		}
		b.stops = append(b.stops, r.stop)
		svc, err := startService(b.o.countersign, b.dir, "countersign-memory-"+strconv.Itoa(i), r, pt, b.keyHash, "1m", false)
		if err != nil {
			return err
		}
		b.stops = append(b.stops, svc.stop)
		wait := time.Duration(0)
		if b.o.memExpiry && i == 1 {
			wait = time.Minute + 2*time.Second
		}
		m, err := measureMemory(ctx, r, newClient(svc.addr, b.key, 32), pt, b.o.memN, b.o.memRandom, wait)
		if err != nil {
			return err
		}
		m.Config = cfg.name
		b.rep.mem = append(b.rep.mem, &m)
		svc.stop()
		r.stop()
	}
	return nil
}

// prepareRun is c agents preparing small emails for d.
func prepareRun(name string, c *client, conns int, d time.Duration) run {
	reqs := make([]*fasthttp.Request, conns)
	resps := make([]*fasthttp.Response, conns)
	for i := range conns {
		reqs[i], resps[i] = fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	}
	return closedLoop(name, conns, d, func(w, i int) (time.Duration, error) {
		c.api(reqs[w], "POST", "/v1/operations", smallEmail(w, i))
		t := time.Now()
		err := c.do(reqs[w], resps[w], 201)
		return time.Since(t), err
	})
}

// settle waits for the work a run left behind (queued tasks, audit events
// not yet sealed, the limit handler's keys expiring) to be done, so that
// it does not land on the next run.
func settle(ctx context.Context, r *redisProc) error {
	time.Sleep(2 * time.Second)
	_, _, err := drain(ctx, r)
	return err
}

// drain waits until the queues are empty and the audit sealed, and says
// how much was left when it began and how long it took.
func drain(ctx context.Context, r *redisProc) (backlog int64, took time.Duration, err error) {
	start := time.Now()
	for i := 0; ; i++ {
		q, err := sumXLen(ctx, r, "cs:*:q")
		if err != nil {
			return 0, 0, err
		}
		a, err := sumXLen(ctx, r, "cs:*:a")
		if err != nil {
			return 0, 0, err
		}
		if i == 0 {
			backlog = q + a
		}
		if q+a == 0 {
			return backlog, time.Since(start), nil
		}
		if time.Since(start) > 2*time.Minute {
			return backlog, 0, fmt.Errorf("still %d queued and %d audit events unsealed after 2 minutes", q, a)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// profileSelf takes a CPU profile of the bench itself (its own cost is
// part of what the machine spends on a run).
func (b *bench) profileSelf(on bool, name string) (stop func()) {
	if !on {
		return func() {}
	}
	path := filepath.Join(b.dir, name+".pprof")
	f, err := os.Create(path)
	if err != nil || pprof.StartCPUProfile(f) != nil {
		log.Printf("bench: profile %s: %v", name, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		b.rep.profiles = append(b.rep.profiles, path)
	}
}

// profileIf takes a CPU profile of the service while a run lasts, and a
// profile of what it allocated meanwhile (name-allocs.pprof: -sample_index
// alloc_space or alloc_objects).
func (b *bench) profileIf(on bool, svc *service, name string) (stop func()) {
	if !on {
		return func() {}
	}
	secs := max(int(b.o.duration.Seconds())-1, 1)
	var wg sync.WaitGroup
	for file, path := range map[string]string{name: "profile", name + "-allocs": "allocs"} {
		wg.Go(func() {
			resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", svc.debug, path, secs))
			if err != nil {
				log.Printf("bench: profile %s: %v", file, err)
				return
			}
			defer resp.Body.Close()
			out := filepath.Join(b.dir, file+".pprof")
			f, err := os.Create(out)
			if err != nil {
				log.Printf("bench: profile %s: %v", file, err)
				return
			}
			defer f.Close()
			if _, err := io.Copy(f, resp.Body); err == nil {
				b.mu.Lock()
				b.rep.profiles = append(b.rep.profiles, out)
				b.mu.Unlock()
			}
		})
	}
	return wg.Wait
}

// redisArgs is -redis-config as redis-server's arguments.
func (o *options) redisArgs() []string {
	f := strings.Fields(o.redisConfig)
	for i := 0; i < len(f); i += 2 {
		f[i] = "--" + f[i]
	}
	return f
}
