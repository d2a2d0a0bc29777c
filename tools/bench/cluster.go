package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The cluster phase measures end-to-end loops per second on a Redis
// Cluster of three masters (no replicas, no persistence), once for each
// shard count of -cluster-shards, on a freshly flushed cluster and a
// fresh countersign serve each time: with 1 shard every queue and
// operation key lives on one master; with more, the shards spread over
// the masters. It reports the rate and how the Redis work (commands and
// their CPU time, INFO commandstats) divided between the masters.

type clusterRun struct {
	shards    int
	loops     int
	elapsed   time.Duration
	perMaster []masterShare
	cpu       usage
}

type masterShare struct {
	addr        string
	calls, usec int64
	cpu         time.Duration
}

// startCluster starts n cluster-enabled redis-servers and joins them.
func startCluster(bin, dir string, n int) ([]*redisProc, error) {
	var nodes []*redisProc
	var addrs []string
	for range n {
		r, err := startRedis(bin, dir, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		if err != nil {
			for _, r := range nodes {
				r.stop()
			}
			return nil, err
		}
		nodes = append(nodes, r)
		addrs = append(addrs, r.addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		return nodes, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, r := range nodes {
			info, _ := r.rdb.ClusterInfo(context.Background()).Result()
			if !strings.Contains(info, "cluster_state:ok") {
				ok = false
			}
		}
		if ok {
			return nodes, nil
		}
		if time.Now().After(deadline) {
			return nodes, fmt.Errorf("the cluster did not become ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clusterURL(nodes []*redisProc) string {
	var a []string
	for _, r := range nodes {
		a = append(a, r.addr)
	}
	return "redis://" + strings.Join(a, ",")
}

// cluster runs the cluster phase.
func (b *bench) cluster(ctx context.Context, pt *parties) error {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return fmt.Errorf("the cluster phase needs redis-cli: %w", err)
	}
	nodes, err := startCluster(b.o.redisServer, b.dir, 3)
	for _, r := range nodes {
		b.stops = append(b.stops, r.stop)
	}
	if err != nil {
		return err
	}
	for _, f := range strings.Split(b.o.clusterShards, ",") {
		shards, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || shards < 1 {
			return fmt.Errorf("-cluster-shards: %q is not a shard count", f)
		}
		for _, r := range nodes {
			if err := r.rdb.FlushAll(ctx).Err(); err != nil {
				return err
			}
			if err := r.rdb.ConfigResetStat(ctx).Err(); err != nil {
				return err
			}
		}
		// Several agents: a principal's operations and queue share its
		// shard (one script stores an operation and counts its quotas), so
		// shards spread principals, not one principal's operations.
		keys, hashes := []string{b.key}, []string{b.keyHash}
		for len(keys) < b.o.clusterPrincipals {
			k, h := newAPIKey()
			keys, hashes = append(keys, k), append(hashes, h)
		}
		name := fmt.Sprintf("countersign-cluster-%d", shards)
		svc, err := startServiceURL(b.o.countersign, b.dir, name, clusterURL(nodes), pt, strings.Join(hashes, ","), "15m", shards)
		if err != nil {
			return err
		}
		loopers := make([]*looper, len(keys))
		for i, k := range keys {
			loopers[i] = &looper{c: newClient(svc.addr, k, 4*b.o.loopConns), pt: pt}
		}
		if _, _, errs, first := runLoopers(loopers, b.o.loopConns, 2*time.Second); errs > 0 {
			svc.stop()
			return fmt.Errorf("cluster warm-up (%d shards): %d failures; first: %v", shards, errs, first)
		}
		time.Sleep(2 * time.Second) // the warm-up's tail: sealing, updates
		before := make([]cmdStats, len(nodes))
		cpu0 := make([]time.Duration, len(nodes))
		for i, r := range nodes {
			before[i], cpu0[i] = commandStats(r), procCPU(r.cmd.Process.Pid)
		}
		m := startMeter(svc.cmd.Process.Pid, nodes[0].cmd.Process.Pid)
		samples, elapsed, errs, first := runLoopers(loopers, b.o.loopConns, b.o.duration)
		u := m.stop()
		run := clusterRun{shards: shards, loops: samples, elapsed: elapsed, cpu: u}
		for i, r := range nodes {
			after := commandStats(r)
			var calls, usec int64
			for k, v := range after {
				calls += v[0] - before[i][k][0]
				usec += v[1] - before[i][k][1]
			}
			run.perMaster = append(run.perMaster, masterShare{addr: r.addr, calls: calls, usec: usec,
				cpu: procCPU(r.cmd.Process.Pid) - cpu0[i]})
		}
		svc.stop()
		if errs > 0 {
			return fmt.Errorf("cluster loops (%d shards): %d failures; first: %v", shards, errs, first)
		}
		b.rep.cluster = append(b.rep.cluster, run)
		log.Printf("bench: cluster, %d shard(s): %.0f loops/s", shards, float64(run.loops)/elapsed.Seconds())
	}
	return nil
}

func printCluster(w io.Writer, runs []clusterRun, o options) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "\ncluster: 3 masters (redis-server, no persistence), %d concurrent loops of %d agents for %s, one countersign serve:\n",
		o.loopConns, o.clusterPrincipals, o.duration)
	fmt.Fprintf(w, "  %-7s %8s %9s   %s\n", "shards", "loops/s", "server%", "per master: share of commands, Redis CPU %")
	for _, r := range runs {
		var total int64
		for _, m := range r.perMaster {
			total += m.calls
		}
		var parts []string
		for _, m := range r.perMaster {
			parts = append(parts, fmt.Sprintf("%s %3.0f%% cmds %3.0f%% cpu", m.addr, 100*float64(m.calls)/float64(max(total, 1)),
				100*m.cpu.Seconds()/r.elapsed.Seconds()))
		}
		fmt.Fprintf(w, "  %-7d %8.0f %8.0f%%   %s\n", r.shards, float64(r.loops)/r.elapsed.Seconds(),
			100*r.cpu.Server.Seconds()/r.elapsed.Seconds(), strings.Join(parts, " | "))
	}
}

// runLoopers runs c concurrent loops for d, spread over the loopers (one
// agent each), and returns what they did together.
func runLoopers(ls []*looper, c int, d time.Duration) (samples int, elapsed time.Duration, errs int, first error) {
	type result struct {
		n, errs int
		first   error
		took    time.Duration
	}
	out := make(chan result, len(ls))
	for i, l := range ls {
		n := c / len(ls)
		if i < c%len(ls) {
			n++
		}
		go func() {
			if n == 0 {
				out <- result{}
				return
			}
			s, took, e, f := l.loops(n, d, 0)
			out <- result{len(s), e, f, took}
		}()
	}
	for range ls {
		r := <-out
		samples, errs, elapsed = samples+r.n, errs+r.errs, max(elapsed, r.took)
		if first == nil {
			first = r.first
		}
	}
	return samples, elapsed, errs, first
}
