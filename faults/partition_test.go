//go:build faults

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"
)

// recoveryBound is how soon after the network comes back every replica
// must take writes again, whatever the partition's length (issue 20,
// item 5): one second (go-redis's pool, once it has given up dialing,
// probes once a second: store/open.go), plus a margin for the prober's
// 50 ms step and a loaded machine.
const recoveryBound = time.Second + 250*time.Millisecond

// TestLongPartition: the replicas lose Redis for a long time (every byte
// between them and Redis held by the fault proxy: established connections
// hang, new ones go nowhere), under load, and the network comes back. The
// time from then until each replica takes writes again (a prepare answered
// 201 and every later one too) is measured, for a short partition and a
// long one: it must be under recoveryBound for both.
func TestLongPartition(t *testing.T) {
	c := startCluster(t, clusterOpts{proxy: true})
	lengths := []time.Duration{10 * time.Second, 30 * time.Second}
	if long() {
		lengths = []time.Duration{10 * time.Second, 45 * time.Second}
	}
	var notes []string
	var worst time.Duration
	res := scenario(t, "partition 10 s and "+lengths[1].String()+", measured recovery", c,
		size{ops: 5000, workers: 4, pace: 200 * time.Millisecond, run: lengths[0] + lengths[1] + 12*time.Second, settle: 30 * time.Second}, 60*time.Second,
		func(ctx context.Context, r *rand.Rand) {
			for _, d := range lengths {
				sleep(ctx, 2*time.Second)
				if ctx.Err() != nil {
					return
				}
				rec := c.partition(ctx, r, d)
				var s []string
				for i, x := range rec {
					s = append(s, fmt.Sprintf("replica %d %s", i, x.Round(time.Millisecond)))
					worst = max(worst, x)
				}
				notes = append(notes, fmt.Sprintf("after a %s partition, writes taken again: %v", d, s))
				if ctx.Err() != nil {
					return
				}
			}
		})
	res.Notes = append(res.Notes, notes...)
	for _, n := range notes {
		t.Log(n)
	}
	if len(notes) != len(lengths) {
		t.Fatalf("only %d of %d partitions measured", len(notes), len(lengths))
	}
	if worst > recoveryBound {
		t.Errorf("a replica took %s to take writes again after the network came back; want under %s", worst, recoveryBound)
	}
}

// partition cuts the replicas off Redis for d (faultproxy.Partition:
// established connections hang, new ones do not connect), heals, and
// returns per replica how long after that it took writes again: the start
// of the first prepare answered 201 from which on no prepare failed.
// Prepares start every 50 ms on every replica, each on its own, so that
// one hanging request does not hide the moment the next one succeeds.
func (c *cluster) partition(ctx context.Context, r *rand.Rand, d time.Duration) []time.Duration {
	c.proxy.Partition()
	time.Sleep(d)
	healed := time.Now()
	c.proxy.Heal()
	type probe struct {
		start time.Time
		ok    bool
	}
	var mu sync.Mutex
	probes := make([][]probe, len(c.replicas))
	hc := &http.Client{Timeout: 10 * time.Second}
	rn := newRun(c, r.Uint64())
	var wg sync.WaitGroup
	for time.Since(healed) < 4*time.Second && ctx.Err() == nil {
		for i, rep := range c.replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				o := rn.newOp()
				body := fmt.Sprintf(`{"action":"http.request","input":{"target":"items","method":"PATCH","path":%q,"body":{"qty":1}},"idempotency_key":%q}`, o.path, o.idem)
				st, _, _ := rn.callWith(ctx, hc, "POST", rep.url+"/v1/operations", agentKey, "application/json", body)
				mu.Lock()
				probes[i] = append(probes[i], probe{start: start, ok: st == 201})
				mu.Unlock()
			}()
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	out := make([]time.Duration, len(c.replicas))
	for i, ps := range probes {
		sort.Slice(ps, func(a, b int) bool { return ps[a].start.Before(ps[b].start) })
		// the first success after the last failure
		first := time.Time{}
		for _, p := range ps {
			switch {
			case !p.ok:
				first = time.Time{}
			case first.IsZero():
				first = p.start
			}
		}
		if first.IsZero() {
			out[i] = 4 * time.Second // never recovered within the probe window
			continue
		}
		out[i] = first.Sub(healed)
	}
	return out
}
