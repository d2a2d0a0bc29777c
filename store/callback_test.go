package store_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

func approvalRef(p string) approval.Ref {
	return approval.Ref{Principal: p, Key: approval.NewOperationKey()}
}

// The status webhook's cursor moves one change at a time: a late retry of
// an earlier change, or a change out of order, never moves it; a failure
// backs off, holds the callback lease for the wait, and schedules a retry
// that the timers fire onto the queue.
func TestCallbackCursorAndBackoff(t *testing.T) {
	f := newFixture(t)
	op := f.draft("p1", 10)
	f.send(op)
	for _, c := range []struct {
		seq  int
		want bool
		at   int
	}{{2, false, 0}, {1, true, 1}, {1, false, 1}, {3, false, 1}, {2, true, 2}} {
		moved, err := f.st.CallbackSent(bg, op.Ref(), c.seq)
		if err != nil || moved != c.want {
			t.Fatalf("CallbackSent(%d) = %v, %v; want %v", c.seq, moved, err, c.want)
		}
		if got := f.get(op).CallbacksSent; got != c.at {
			t.Fatalf("after CallbackSent(%d) the cursor is %d, want %d", c.seq, got, c.at)
		}
	}
	v := f.get(op).Version

	for i, c := range []struct {
		least time.Duration
		wait  time.Duration
	}{{0, time.Second}, {0, 2 * time.Second}, {30 * time.Second, 30 * time.Second}, {0, 8 * time.Second}} {
		n, wait, err := f.st.FailCallback(bg, op.Ref(), f.now, c.least)
		if err != nil || n != i+1 || wait != c.wait {
			t.Fatalf("attempt %d: FailCallback = %d, %s, %v; want %d, %s", i+1, n, wait, err, i+1, c.wait)
		}
		// The lease holds the backoff: nobody retries sooner.
		got, left, err := f.st.Lease(bg, op.Ref(), "callback", "someone", time.Second)
		if err != nil || got || left <= c.wait-time.Second || left > c.wait {
			t.Fatalf("lease during the backoff: %v, %s, %v", got, left, err)
		}
	}
	// The retry is a timer: nothing fires before its time, one task after.
	fired, err := f.st.FireDue(bg, f.now.Add(7*time.Second))
	if err != nil || fired != 0 {
		t.Fatalf("fired %d before the retry was due (%v)", fired, err)
	}
	if fired, err = f.st.FireDue(bg, f.now.Add(9*time.Second)); err != nil || fired != 1 {
		t.Fatalf("fired %d when the retry was due (%v)", fired, err)
	}
	// A delivery starts the attempts again, and neither counts as a change.
	if moved, err := f.st.CallbackSent(bg, op.Ref(), 3); err != nil || !moved {
		t.Fatalf("CallbackSent(3) = %v, %v", moved, err)
	}
	if n, wait, err := f.st.FailCallback(bg, op.Ref(), f.now, 0); err != nil || n != 1 || wait != time.Second {
		t.Fatalf("after a delivery: attempt %d, wait %s (%v)", n, wait, err)
	}
	if got := f.get(op).Version; got != v {
		t.Fatalf("version %d → %d: the webhook's bookkeeping is no change of the operation", v, got)
	}

	// An operation that is gone is not brought back by either.
	if moved, err := f.st.CallbackSent(bg, approvalRef("p1"), 1); err != nil || moved {
		t.Fatalf("CallbackSent on a missing operation: %v %v", moved, err)
	}
	if n, _, err := f.st.FailCallback(bg, approvalRef("p1"), f.now, 0); err != nil || n != 0 {
		t.Fatalf("FailCallback on a missing operation: %d %v", n, err)
	}
}
