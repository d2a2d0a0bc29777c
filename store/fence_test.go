package store_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

func leasedClaim(now time.Time, token string, lease time.Duration) approval.ClaimTransition {
	c := claim(now, token)
	c.Lease = lease
	return c
}

// The re-check before an effect holds while the lease is renewed, and
// never again once the lease passed on the store's clock: a paused
// executor that resumes finds its claim fenced.
func TestFenceHoldsWhileRenewedAndNeverAfterItPassed(t *testing.T) {
	f := newFixture(t)
	op := approved(f)
	const lease = 300 * time.Millisecond
	if ok, _, err := f.st.Claim(bg, op.Ref(), leasedClaim(f.now, "mine", lease)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if cur := f.get(op); cur.LeaseUntil == nil {
		t.Fatal("the claim recorded no lease")
	}
	for range 4 { // renewed past the first lease's end
		time.Sleep(lease / 2)
		if res, _, err := f.st.Fence(bg, op.Ref(), "mine", lease); res != approval.FenceHeld || err != nil {
			t.Fatalf("renewed claim: %v, %v", res, err)
		}
	}
	if res, st, err := f.st.Fence(bg, op.Ref(), "theirs", lease); res != approval.FenceLost || st != approval.StatusExecuting || err != nil {
		t.Fatalf("another token: %v %s %v", res, st, err)
	}
	time.Sleep(lease + 100*time.Millisecond) // the executor is paused
	for range 2 {
		if res, _, err := f.st.Fence(bg, op.Ref(), "mine", lease); res != approval.FenceExpired || err != nil {
			t.Fatalf("after the lease passed: %v, %v", res, err)
		}
	}
}

// While the lease is live an operator may settle only as unknown; once it
// passed, also as succeeded or failed. Either way the claim is fenced.
func TestSettleWhileLeasedOnlyAsUnknown(t *testing.T) {
	f := newFixture(t)
	const lease = 400 * time.Millisecond
	settle := func(op *approval.Operation, unknown bool) (bool, error) {
		_, moved, err := f.st.Settle(bg, op.Ref(), approval.SettleTransition{Step: step(f.now, "reconciled"), To: approval.StatusFailed, Unknown: unknown})
		return moved, err
	}

	op := approved(f)
	if ok, _, err := f.st.Claim(bg, op.Ref(), leasedClaim(f.now, "mine", lease)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	moved, err := settle(op, false)
	if moved || code(err) != approval.CodeInvalidState {
		t.Fatalf("failed while leased: moved %v, %v", moved, err)
	}
	var e *approval.Error
	if ae, ok := err.(*approval.Error); ok {
		e = ae
	}
	if e == nil || e.Details["lease_remaining_seconds"] == nil {
		t.Fatalf("no lease_remaining_seconds in %#v", err)
	}
	if cur := f.get(op); cur.Status != approval.StatusExecuting {
		t.Fatalf("status %s after a refused settlement", cur.Status)
	}
	if moved, err := settle(op, true); !moved || err != nil {
		t.Fatalf("unknown while leased: %v %v", moved, err)
	}
	if res, st, _ := f.st.Fence(bg, op.Ref(), "mine", lease); res != approval.FenceLost || st != approval.StatusFailed {
		t.Fatalf("fence after the settlement: %v %s", res, st)
	}

	op2 := approved(f)
	if ok, _, err := f.st.Claim(bg, op2.Ref(), leasedClaim(f.now, "mine2", lease)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	time.Sleep(lease + 100*time.Millisecond)
	if moved, err := settle(op2, false); !moved || err != nil {
		t.Fatalf("failed after the lease passed: %v %v", moved, err)
	}
}

// An outcome that arrives after a settlement is kept beside it, audited as
// late_outcome, once; the terminal state does not change.
func TestFinishAfterSettlementIsALateOutcome(t *testing.T) {
	f := newFixture(t)
	op := approved(f)
	if ok, _, err := f.st.Claim(bg, op.Ref(), leasedClaim(f.now, "mine", time.Minute)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, moved, err := f.st.Settle(bg, op.Ref(), approval.SettleTransition{Step: step(f.now, "reconciled"), To: approval.StatusFailed, Unknown: true}); !moved || err != nil {
		t.Fatal(moved, err)
	}
	ft := approval.FinishTransition{Step: step(f.now, "succeeded"), Token: "mine", To: approval.StatusSucceeded, Result: []byte(`{"status":200}`),
		Late:      &approval.LateOutcome{Status: approval.StatusSucceeded, At: f.now, Result: []byte(`{"status":200}`)},
		LateEvent: approval.Event{Time: f.now, Event: "late_outcome", Actor: "system"}}
	for range 2 { // a retry records nothing more
		late, err := f.st.Finish(bg, op.Ref(), ft)
		if !late || err != nil {
			t.Fatalf("late finish: %v %v", late, err)
		}
	}
	cur := f.get(op)
	if cur.Status != approval.StatusFailed || cur.LateOutcome == nil || cur.LateOutcome.Status != approval.StatusSucceeded {
		t.Fatalf("status %s, late %+v", cur.Status, cur.LateOutcome)
	}
	evs, err := f.st.Events(bg, op.Ref())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Event == "late_outcome" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d late_outcome events", n)
	}
	// Another token's outcome is still refused.
	ft.Token, ft.Tx = "theirs", approval.RandomToken(8)
	if _, err := f.st.Finish(bg, op.Ref(), ft); code(err) != approval.CodeInvalidState {
		t.Fatalf("another claimer's late outcome: %v", err)
	}
}
