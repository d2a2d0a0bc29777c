package store_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
)

// BenchmarkDurability measures what waiting for a replica costs, side by
// side on one master with one replica (real redis-server processes on
// loopback): prepare (the create script) and an approval (the decide
// script that reaches quorum), each with transitions acknowledged at once
// (Replicas 0, the old behaviour) and after WAIT 1 (what
// COUNTERSIGN_REDIS_MIN_REPLICAS=auto chooses with a replica), in turn in
// one loop; it reports the median and 90th percentile of each.
//
//	go test ./store -run '^$' -bench Durability -benchtime 2000x
func BenchmarkDurability(b *testing.B) {
	master := redistest.StartProcess(b, "--repl-diskless-sync-delay", "0", "--appendonly", "yes", "--appendfsync", "everysec")
	replica := redistest.StartProcess(b, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	rdb := redistest.Client(b, master.URL())
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, _ := rdb.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "state=online") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the replica did not sync")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = replica
	// Two stores on the same master: one acknowledges at once, one waits
	// for the replica. Each iteration runs the step once on each, in
	// turn, so both see the same load (this machine is shared).
	stores := map[string]*benchStore{}
	for name, wait := range map[string]int{"no-wait": 0, "wait-1": 1} {
		st := store.New(rdb, nil)
		b.Cleanup(func() { _ = st.Close() })
		st.SetDurability(store.Durability{Replicas: wait, Timeout: time.Second})
		stores[name] = &benchStore{st: st, rdb: rdb, now: time.Now().UTC().Truncate(time.Millisecond),
			q: approval.Quotas{MaxDrafts: 1e9, MaxPending: 1e9, MaxStoredBytes: 1 << 50, RequestsPerMinute: 1e9, SendsPerMinute: 1e9}}
	}
	names := []string{"no-wait", "wait-1"}
	report := func(b *testing.B, step string, took map[string][]time.Duration) {
		for _, name := range names {
			d := took[name]
			slices.Sort(d)
			b.ReportMetric(float64(d[len(d)/2].Microseconds()), step+"-"+name+"-p50-µs")
			b.ReportMetric(float64(d[len(d)*9/10].Microseconds()), step+"-"+name+"-p90-µs")
		}
	}
	b.Run("prepare", func(b *testing.B) {
		took := map[string][]time.Duration{}
		for i := 0; i < b.N; i++ {
			for _, name := range names {
				t0 := time.Now()
				stores[name].operation(b, "agent", false, time.Now().Add(time.Hour))
				took[name] = append(took[name], time.Since(t0))
			}
		}
		report(b, "prepare", took)
	})
	b.Run("approve", func(b *testing.B) {
		ops := map[string][]*approval.Operation{}
		for _, name := range names {
			for range b.N {
				ops[name] = append(ops[name], stores[name].operation(b, "agent", true, time.Now().Add(time.Hour)))
			}
		}
		b.ResetTimer()
		took := map[string][]time.Duration{}
		for i := 0; i < b.N; i++ {
			for _, name := range names {
				s, op := stores[name], ops[name][i]
				t0 := time.Now()
				res, err := s.st.Decide(context.Background(), op.Ref(), approval.DecideTransition{
					Step:    approval.Step{Tx: approval.RandomToken(8), Now: s.now, Event: approval.Event{Time: s.now, Event: "approval", Actor: "grace"}, Retention: time.Hour},
					Approve: true, Required: 1,
					Decision: approval.Decision{Approver: "grace", Via: "bench", At: s.now, PayloadHash: op.PayloadHash}})
				took[name] = append(took[name], time.Since(t0))
				if err != nil || res.Status != approval.StatusApproved {
					b.Fatalf("decide: %v %v", res.Status, err)
				}
			}
		}
		report(b, "approve", took)
	})
}
