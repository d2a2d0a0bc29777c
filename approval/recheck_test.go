package approval_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// TestSlowRecheckLeavesTimeToDecide: the approval page re-reads a
// state-bound operation's target before it shows or decides; a target that
// does not answer must not spend the request's whole budget (the page's
// 3.5 s), or every decision on a slow target fails as "store unavailable"
// (found by the fault suite: faults/replica_test.go holds the target's
// reads). The re-read gives up after RecheckTimeout and the decision goes
// through; execution re-reads anyway.
func TestSlowRecheckLeavesTimeToDecide(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 1)
	h.effect.recheck = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	link := h.inbox.link(t, "grace")
	ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond) // the page's budget
	defer cancel()
	start := time.Now()
	_, res, err := h.svc.DecideByLink(ctx, link, true, "")
	if err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("decide with a target that does not answer: %v, outcome %v", err, res.Outcome)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("decide took %s; the re-read should give up after 1.5 s", took)
	}
}
