package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/redistest"
	"github.com/countersign/countersign/store"
)

// BenchmarkDurability measures what waiting for a replica costs, side by
// side on one master with one replica (real redis-server processes on
// loopback): prepare (the create script) and an approval (the decide
// script that reaches quorum), each with transitions acknowledged at once
// (Replicas 0, the old behaviour) and after WAIT 1 (what
// COUNTERSIGN_REDIS_MIN_REPLICAS=auto chooses with a replica).
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
	for _, wait := range []int{0, 1} {
		name := "no-wait"
		if wait > 0 {
			name = "wait-1"
		}
		st := store.New(rdb, nil)
		st.SetDurability(store.Durability{Replicas: wait, Timeout: time.Second})
		s := &benchStore{st: st, rdb: rdb, now: time.Now().UTC().Truncate(time.Millisecond),
			q: approval.Quotas{MaxDrafts: 1e9, MaxPending: 1e9, MaxStoredBytes: 1 << 50, RequestsPerMinute: 1e9, SendsPerMinute: 1e9}}
		b.Run("prepare/"+name, func(b *testing.B) {
			for b.Loop() {
				s.operation(b, "agent", false, s.now.Add(time.Hour))
			}
		})
		b.Run("approve/"+name, func(b *testing.B) {
			ops := make([]*approval.Operation, b.N)
			for i := range ops {
				ops[i] = s.operation(b, "agent", true, s.now.Add(time.Hour))
			}
			b.ResetTimer()
			for i := range b.N {
				op := ops[i]
				res, err := st.Decide(context.Background(), op.Ref(), approval.DecideTransition{
					Step:    approval.Step{Tx: approval.RandomToken(8), Now: s.now, Event: approval.Event{Time: s.now, Event: "approval", Actor: "grace"}, Retention: time.Hour},
					Approve: true, Required: 1,
					Decision: approval.Decision{Approver: "grace", Via: "bench", At: s.now, PayloadHash: op.PayloadHash}})
				if err != nil || res.Status != approval.StatusApproved {
					b.Fatalf("decide: %v %v", res.Status, err)
				}
			}
		})
	}
}
