package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

type roundResult struct {
	limit, prepare run
	// What the prepare run left for the audit sealer, and how long it took
	// to seal after the run ended (its cost is off the request path, but
	// it is countersign's).
	prepareBacklog int64
	prepareDrain   time.Duration
	loops          []sample
	loopElapsed    time.Duration
	loopBacklog    int64
	loopDrain      time.Duration
	// CPU each party used during each run.
	limitCPU, prepareCPU, loopCPU usage
	// What Redis spent per request, by command (INFO commandstats).
	limitRedis, prepareRedis, loopRedis string
}

func (r roundResult) loopRate() float64 { return float64(len(r.loops)) / r.loopElapsed.Seconds() }

func (r roundResult) requestsPerLoop() float64 {
	n := 0
	for _, s := range r.loops {
		n += s.Requests
	}
	return float64(n) / float64(max(len(r.loops), 1))
}

type report struct {
	o        options
	machine  string
	rounds   []roundResult
	latency  []sample
	trips    []trips
	mem      []*memResult
	cluster  []clusterRun
	gateway  *gatewayReport
	profiles []string
}

// machine describes where the numbers come from.
func machine(redisServer string) string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rv, _ := exec.CommandContext(ctx, redisServer, "--version").Output()
	return fmt.Sprintf("%d cores (%s), Linux %s, %s, %s", runtime.NumCPU(), cpu, strings.TrimSpace(string(kernel)),
		runtime.Version(), strings.TrimSpace(strings.SplitN(string(rv), " sha=", 2)[0]))
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\ncountersign bench, %s\nmachine: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), r.machine)
	if len(r.rounds) > 0 {
		r.printRounds(w)
	}
	printCluster(w, r.cluster, r.o)
	if r.gateway != nil {
		r.gateway.print(w)
	}
	if len(r.latency) > 0 {
		fmt.Fprintf(w, "\nlatency, one loop at a time (the human pauses %s between opening the page and approving), n=%d, ms:\n",
			r.o.park, len(r.latency))
		printPhases(w, r.latency)
	}
	if len(r.trips) > 0 {
		fmt.Fprintf(w, "\nRedis commands per request (MONITOR; commands run inside a script are not counted):\n")
		for _, t := range r.trips {
			target := ""
			if t.Want > 0 {
				target = fmt.Sprintf("  (target ≤ %d)", t.Want)
			}
			fmt.Fprintf(w, "  %-40s %3d%s\n", t.What, len(t.Commands), target)
			if len(t.Commands) > 6 {
				fmt.Fprintf(w, "      %s\n", byCommand(t.Commands))
				continue
			}
			for _, c := range t.Commands {
				fmt.Fprintf(w, "      %s\n", c)
			}
		}
	}
	for _, m := range r.mem {
		kind := "prose"
		if m.Random {
			kind = "random, incompressible"
		}
		fmt.Fprintf(w, "\nRedis memory (INFO used_memory delta over %d operations, input %d bytes of JSON, %s text; %s):\n", m.N, m.InputBytes, kind, m.Config)
		fmt.Fprintf(w, "  pending operation (sent, notified)     %7.0f bytes = %.2f KiB\n", m.Pending, m.Pending/1024)
		fmt.Fprintf(w, "  draft, never sent                      %7.0f bytes = %.2f KiB  (keys live %s)\n", m.Draft, m.Draft/1024, m.DraftTTL.Round(time.Second))
		shapes := slices.Sorted(maps.Keys(m.Breakdown))
		slices.SortStableFunc(shapes, func(a, b string) int { return cmp.Compare(m.Breakdown[b], m.Breakdown[a]) })
		for _, k := range shapes {
			if m.Breakdown[k] >= 1 {
				fmt.Fprintf(w, "    MEMORY USAGE per pending op %7.0f bytes  %s\n", m.Breakdown[k], k)
			}
		}
		if m.Measured {
			fmt.Fprintf(w, "  never-sent draft after its expiry      %7.0f bytes = %.2f KiB  (kept %s more)\n", m.Tomb, m.Tomb/1024, m.TombTTL.Round(time.Second))
		}
	}
	for _, p := range r.profiles {
		fmt.Fprintf(w, "\nCPU profile: %s (go tool pprof -top %s)\n", p, p)
	}
	r.printTargets(w)
}

func (r *report) printRounds(w io.Writer) {
	fmt.Fprintf(w, "\nthroughput, alternating in one run (each run %s; prepare and limit handler with %d connections; %d concurrent loops):\n",
		r.o.duration, r.o.conns, r.o.loopConns)
	fmt.Fprintf(w, "  %-6s %10s %10s %8s %9s %9s %12s %22s\n", "round", "limit/s", "prepare/s", "ratio", "loops/s", "req/loop", "loop ratio", "audit left (sealed in)")
	var lim, prep, loops []float64
	var reqs float64
	for i, rd := range r.rounds {
		lr := rd.loopRate()
		fmt.Fprintf(w, "  %-6d %10.0f %10.0f %8.2f %9.0f %9.1f %12.2f %14d (%s)\n", i+1, rd.limit.Rate(), rd.prepare.Rate(),
			rd.prepare.Rate()/rd.limit.Rate(), lr, rd.requestsPerLoop(), lr/(rd.limit.Rate()/rd.requestsPerLoop()),
			rd.prepareBacklog, rd.prepareDrain.Round(time.Millisecond))
		lim, prep, loops = append(lim, rd.limit.Rate()), append(prep, rd.prepare.Rate()), append(loops, lr)
		reqs += rd.requestsPerLoop()
	}
	reqs /= float64(len(r.rounds))
	fmt.Fprintf(w, "  %-6s %10.0f %10.0f %8.2f %9.0f %9.1f %12.2f\n", "mean", mean(lim), mean(prep), mean(prep)/mean(lim),
		mean(loops), reqs, mean(loops)/(mean(lim)/reqs))

	fmt.Fprintf(w, "\nCPU per request (per loop for loops), µs: the server, Redis, the bench itself; and how busy the machine was\n")
	fmt.Fprintf(w, "  %-6s %-22s %9s %9s %9s %14s %14s\n", "round", "run", "server", "redis", "bench", "machine busy", "other work")
	for i, rd := range r.rounds {
		for _, x := range []struct {
			name string
			u    usage
			n    int
		}{{"limit handler", rd.limitCPU, rd.limit.N}, {"countersign prepare", rd.prepareCPU, rd.prepare.N}, {"countersign loop", rd.loopCPU, len(rd.loops)}} {
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(x.n, 1)) }
			busy := func(d time.Duration) string { return fmt.Sprintf("%.0f%%", 100*d.Seconds()/x.u.Wall.Seconds()) }
			fmt.Fprintf(w, "  %-6d %-22s %9.0f %9.0f %9.0f %14s %14s\n", i+1, x.name, per(x.u.Server), per(x.u.Redis), per(x.u.Bench),
				busy(x.u.Machine), busy(x.u.Others()))
		}
	}

	fmt.Fprintf(w, "\nRedis per request, by command (calls and µs, INFO commandstats; a script's own commands count inside it too):\n")
	for i, rd := range r.rounds {
		fmt.Fprintf(w, "  %d limit handler: %s\n  %d prepare: %s\n  %d loop: %s\n", i+1, rd.limitRedis, i+1, rd.prepareRedis, i+1, rd.loopRedis)
	}

	var limLat, prepLat []time.Duration
	var all []sample
	for _, rd := range r.rounds {
		limLat = append(limLat, rd.limit.Lat...)
		prepLat = append(prepLat, rd.prepare.Lat...)
		all = append(all, rd.loops...)
	}
	fmt.Fprintf(w, "\nlatency under that load, ms:\n  %-40s %8s %8s %8s\n", "", "p50", "p99", "n")
	fmt.Fprintf(w, "  %-40s %8.2f %8.2f %8d\n", "limit handler POST", pct(limLat, 50), pct(limLat, 99), len(limLat))
	fmt.Fprintf(w, "  %-40s %8.2f %8.2f %8d\n", "countersign prepare POST", pct(prepLat, 50), pct(prepLat, 99), len(prepLat))
	printPhases(w, all)
}

// phase names and their values, in loop order.
var phases = []struct {
	name string
	get  func(sample) time.Duration
}{
	{"loop: prepare", func(s sample) time.Duration { return s.Prepare }},
	{"loop: send", func(s sample) time.Duration { return s.Send }},
	{"send → notification delivered", func(s sample) time.Duration { return s.Notify }},
	{"approval page GET", func(s sample) time.Duration { return s.Page }},
	{"approve POST", func(s sample) time.Duration { return s.Decide }},
	{"long-poll wake after the decision", func(s sample) time.Duration { return s.Wake }},
	{"click → SMTP accept", func(s sample) time.Duration { return s.Click }},
	{"click → agent sees succeeded", func(s sample) time.Duration { return s.Done }},
	{"whole loop", func(s sample) time.Duration { return s.Total }},
}

func printPhases(w io.Writer, s []sample) {
	for _, p := range phases {
		d := make([]time.Duration, len(s))
		for i, x := range s {
			d[i] = p.get(x)
		}
		fmt.Fprintf(w, "  %-40s %8.2f %8.2f %8d\n", p.name, pct(d, 50), pct(d, 99), len(d))
	}
}

func (r *report) printTargets(w io.Writer) {
	fmt.Fprintf(w, "\ntargets:\n  %-74s %14s %10s  %s\n", "figure", "measured", "target", "")
	row := func(name, got, want string, ok bool) {
		mark := "met"
		if !ok {
			mark = "NOT MET"
		}
		fmt.Fprintf(w, "  %-74s %14s %10s  %s\n", name, got, want, mark)
	}
	if len(r.rounds) > 0 {
		var lim, prep, loops, reqs []float64
		for _, rd := range r.rounds {
			lim, prep, loops, reqs = append(lim, rd.limit.Rate()), append(prep, rd.prepare.Rate()), append(loops, rd.loopRate()), append(reqs, rd.requestsPerLoop())
		}
		ratio := mean(prep) / mean(lim)
		row("prepare throughput / limit handler", fmt.Sprintf("%.2f", ratio), "≥ 0.60", ratio >= 0.60)
		lr := mean(loops) / (mean(lim) / mean(reqs))
		row("full loop throughput / (limit rate ÷ requests per loop)", fmt.Sprintf("%.2f", lr), "≥ 0.40", lr >= 0.40)
		// The same ratios from the CPU each request took (server, Redis and
		// the bench together): what the rates would be on a machine of
		// their own, less disturbed by other work on a shared one.
		var limCPU, prepCPU, loopCPU float64
		for _, rd := range r.rounds {
			limCPU += perRequest(rd.limitCPU, rd.limit.N)
			prepCPU += perRequest(rd.prepareCPU, rd.prepare.N)
			loopCPU += perRequest(rd.loopCPU, len(rd.loops))
		}
		fmt.Fprintf(w, "  %-74s %14.2f %10s\n", "  (from CPU per request: prepare / limit handler)", limCPU/prepCPU, "")
		fmt.Fprintf(w, "  %-74s %14.2f %10s\n", "  (from CPU per request: full loop / (limit ÷ requests per loop))", limCPU*mean(reqs)/loopCPU, "")
	}
	for _, m := range r.mem {
		row("Redis memory per pending op, 1 KiB input ("+strings.SplitN(m.Config, ",", 2)[0]+")", fmt.Sprintf("%.2f KiB", m.Pending/1024), "≤ 3 KiB", m.Pending <= 3*1024)
		if m.Measured {
			row("never-sent draft kept after expiry", m.TombTTL.Round(time.Minute).String(), "≤ 1h", m.TombTTL <= time.Hour)
		}
	}
	if len(r.latency) > 0 {
		wake := make([]time.Duration, len(r.latency))
		click := make([]time.Duration, len(r.latency))
		for i, s := range r.latency {
			wake[i], click[i] = s.Wake, s.Click
		}
		row("long-poll wake after decision, p99 (one loop at a time)", fmt.Sprintf("%.2f ms", pct(wake, 99)), "≤ 5 ms", pct(wake, 99) <= 5)
		row("click → SMTP accept, p99 (one loop at a time)", fmt.Sprintf("%.2f ms", pct(click, 99)), "≤ 10 ms", pct(click, 99) <= 10)
	}
	fmt.Fprintf(w, "  (expiry among 1,000,000 stored and listing among 100,000: go test -bench in store/, see BENCHMARKS.md)\n")
}

// byCommand summarizes commands by name: "evalsha ×9, hgetall ×4".
func byCommand(cmds []string) string {
	n := map[string]int{}
	var order []string
	for _, c := range cmds {
		name, _, _ := strings.Cut(strings.Trim(c, `"`), `"`)
		if n[name] == 0 {
			order = append(order, name)
		}
		n[name]++
	}
	parts := make([]string, len(order))
	for i, name := range order {
		parts[i] = fmt.Sprintf("%s ×%d", name, n[name])
	}
	return strings.Join(parts, ", ")
}

// perRequest is the CPU of server, Redis and bench together per request.
func perRequest(u usage, n int) float64 {
	return float64((u.Server + u.Redis + u.Bench).Microseconds()) / float64(max(n, 1))
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
