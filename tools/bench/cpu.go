package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU time used during a run, per process (from /proc/PID/stat, in clock
// ticks of 10 ms) and by the whole machine (/proc/stat): on a shared
// machine, the CPU each server spends per request is steadier than its
// rate, and what the rest of the machine used says how much the run had.

const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux

// procCPU is user+system CPU time of pid so far.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// Fields after the command name (which is in parentheses and may hold spaces).
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * tick
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU is the busy CPU time of the whole machine so far.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * tick
}

// usage is the CPU a run took, per party.
type usage struct {
	Server, Redis, Bench, Machine time.Duration
	Wall                          time.Duration
}

// Others is what the rest of the machine (other work on it) used.
func (u usage) Others() time.Duration { return max(u.Machine-u.Server-u.Redis-u.Bench, 0) }

type meter struct {
	server, redis int
	start         usage
}

func startMeter(server, redis int) *meter {
	m := &meter{server: server, redis: redis}
	m.start = m.read()
	return m
}

func (m *meter) read() usage {
	return usage{Server: procCPU(m.server), Redis: procCPU(m.redis), Bench: selfCPU(), Machine: machineCPU(), Wall: time.Duration(time.Now().UnixNano())}
}

func (m *meter) stop() usage {
	e := m.read()
	return usage{Server: e.Server - m.start.Server, Redis: e.Redis - m.start.Redis, Bench: e.Bench - m.start.Bench,
		Machine: e.Machine - m.start.Machine, Wall: e.Wall - m.start.Wall}
}

// cmdStats is INFO commandstats: calls and microseconds per command.
type cmdStats map[string][2]int64

func commandStats(r *redisProc) cmdStats {
	info, err := r.rdb.Info(context.Background(), "commandstats").Result()
	out := cmdStats{}
	if err != nil {
		return out
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls, usec int64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = [2]int64{calls, usec}
	}
	return out
}

// top is what Redis spent per request in a run, by command, most first
// (commands a script runs count under their own name as well as in the
// script's time).
func (after cmdStats) top(before cmdStats, n, requests int) string {
	type row struct {
		name        string
		calls, usec int64
	}
	var rows []row
	for k, v := range after {
		b := before[k]
		if d := v[1] - b[1]; d > 0 {
			rows = append(rows, row{k, v[0] - b[0], d})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return int(b.usec - a.usec) })
	var parts []string
	for _, r := range rows[:min(n, len(rows))] {
		parts = append(parts, fmt.Sprintf("%s %.1f×/%.1fµs", r.name, float64(r.calls)/float64(max(requests, 1)), float64(r.usec)/float64(max(requests, 1))))
	}
	return strings.Join(parts, ", ")
}
