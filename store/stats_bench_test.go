package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
)

// BenchmarkStats is the cost of one scrape's gauges: 50 principals, 20
// pending operations each, 16 shards (REDIS_URL for a real Redis).
func BenchmarkStats(b *testing.B) {
	st := store.New(redistest.Start(b).Client(b), nil)
	b.Cleanup(func() { _ = st.Close() })
	now := time.Now().UTC()
	q := approval.Quotas{MaxDrafts: 100, MaxPending: 100, MaxStoredBytes: 1 << 30, RequestsPerMinute: 1e6, SendsPerMinute: 1e6}
	var principals []string
	for p := range 50 {
		id := fmt.Sprintf("agent-%d", p)
		principals = append(principals, id)
		for range 20 {
			op := &approval.Operation{Key: approval.NewOperationKey(), Action: "test.effect", Principal: id, Input: []byte(`{}`),
				PayloadHash: "sha256:x", CreatedAt: now, Status: approval.StatusDraft, ExpiresAt: now.Add(time.Hour),
				Route: approval.Route{Name: "r", Approvers: []string{"a"}, Required: 1, ApprovalTTL: time.Hour}}
			s := approval.Step{Tx: approval.RandomToken(6), Now: now, Event: approval.Event{Time: now, Event: "prepared"}, Retention: time.Hour}
			if err := st.Create(bg, op, approval.CreateTransition{Step: s, TTL: 2 * time.Hour, Quotas: q}); err != nil {
				b.Fatal(err)
			}
			s.Tx = approval.RandomToken(6)
			if _, _, err := st.Send(bg, op.Ref(), approval.SendTransition{Step: s, ExpiresAt: now.Add(10 * time.Minute), TTL: 2 * time.Hour, Quotas: q}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for b.Loop() {
		s, err := st.Stats(bg, principals, now, 15*time.Minute)
		if err != nil || s.Pending != 1000 || s.ExpiringSoon != 1000 {
			b.Fatalf("stats %+v %v", s, err)
		}
	}
}
