package approval_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
)

// Benchmarks run against REDIS_URL when set (the numbers that matter),
// else against the embedded miniredis:
//
//	REDIS_URL=redis://127.0.0.1:6379/15 go test -run '^$' -bench . -benchtime 2000x ./approval/

func benchHarness(b *testing.B) *harness {
	srv := redistest.Start(b)
	return newHarnessOn(b, srv.Client(b), opts{})
}

// BenchmarkPrepare measures a whole prepare: validation, canonical JSON,
// payload hash, route resolution and the create script.
func BenchmarkPrepare(b *testing.B) {
	h := benchHarness(b)
	input := json.RawMessage(`{"n":1,"note":"benchmark"}`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: input}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaim measures the claim script (approved → executing): Win
// claims a fresh approved operation each time; Lose is the contended case,
// a claim on an operation someone else already holds.
func BenchmarkClaim(b *testing.B) {
	claim := func(now time.Time) approval.ClaimTransition {
		return approval.ClaimTransition{Step: approval.Step{Tx: approval.RandomToken(8), Now: now, Retention: time.Hour},
			Token: approval.RandomToken(8)}
	}
	b.Run("Win", func(b *testing.B) {
		h := benchHarness(b)
		keys := make([]approval.Ref, 0, b.N)
		for range b.N {
			keys = append(keys, approvedOp(b, h))
		}
		now := h.clock.Now()
		b.ResetTimer()
		for i := range b.N {
			if won, _, err := h.store.Claim(bg, keys[i], claim(now)); err != nil || !won {
				b.Fatalf("claim: %v %v", won, err)
			}
		}
	})
	b.Run("Lose", func(b *testing.B) {
		h := benchHarness(b)
		key := approvedOp(b, h)
		now := h.clock.Now()
		if won, _, err := h.store.Claim(bg, key, claim(now)); err != nil || !won {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if won, _, err := h.store.Claim(bg, key, claim(now)); err != nil || won {
				b.Fatalf("second claim won: %v", err)
			}
		}
	})
}

func approvedOp(b *testing.B, h *harness) approval.Ref {
	op, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: json.RawMessage(`{"n":1}`)})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := h.svc.Send(bg, h.agent, op.Key); err != nil {
		b.Fatal(err)
	}
	if _, res, err := h.svc.DecideAs(bg, op.Key, "grace", "slack", op.PayloadHash, true, ""); err != nil || res.Outcome != approval.DecideApproved {
		b.Fatalf("approve: %v %v", res, err)
	}
	return op.Ref()
}

// BenchmarkPrepareParallel is prepare's throughput with many agents at once.
func BenchmarkPrepareParallel(b *testing.B) {
	h := benchHarness(b)
	input := json.RawMessage(`{"n":1,"note":"benchmark"}`)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: input}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkClaimParallel is the claim script's throughput with many
// workers claiming distinct approved operations at once.
func BenchmarkClaimParallel(b *testing.B) {
	h := benchHarness(b)
	keys := make(chan approval.Ref, b.N)
	for range b.N {
		keys <- approvedOp(b, h)
	}
	close(keys)
	now := h.clock.Now()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := <-keys
			if won, _, err := h.store.Claim(bg, k, approval.ClaimTransition{Step: approval.Step{Tx: approval.RandomToken(8),
				Now: now, Retention: time.Hour}, Token: approval.RandomToken(8)}); err != nil || !won {
				b.Errorf("claim: %v %v", won, err)
				return
			}
		}
	})
}
