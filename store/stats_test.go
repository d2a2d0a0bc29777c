package store_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/store"
)

// The gauges' counts follow every transition: drafts, pending, approved
// (the nq counter of the decide, claim, finish and sweep scripts) and
// executing, and the queue's depth and oldest task.
func TestStatsFollowTransitions(t *testing.T) {
	f := newFixture(t)
	stats := func() store.Stats {
		t.Helper()
		s, err := f.st.Stats(bg, []string{"p1", "p2"}, f.now, 15*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := func(s store.Stats, drafts, pending, approved, executing int64) {
		t.Helper()
		if s.Drafts != drafts || s.Pending != pending || s.Approved != approved || s.Executing != executing {
			t.Fatalf("stats = drafts %d pending %d approved %d executing %d; want %d %d %d %d",
				s.Drafts, s.Pending, s.Approved, s.Executing, drafts, pending, approved, executing)
		}
	}
	want(stats(), 0, 0, 0, 0)

	a, b, c, d := f.draft("p1", 10), f.draft("p1", 10), f.draft("p2", 10), f.draft("p2", 10)
	want(stats(), 4, 0, 0, 0)
	for _, op := range []*approval.Operation{a, b, c, d} {
		f.send(op)
	}
	s := stats()
	want(s, 0, 4, 0, 0)
	if s.QueueDepth < 4 || s.OldestTask < 0 {
		t.Fatalf("queue depth %d, oldest %s after four sends", s.QueueDepth, s.OldestTask)
	}

	// a and b reach quorum (2); b is claimed; c is rejected.
	for _, op := range []*approval.Operation{a, b} {
		f.approve(op, "grace")
		if res := f.approve(op, "ada"); res.Outcome != approval.DecideApproved {
			t.Fatalf("second approval: %s", res.Outcome)
		}
	}
	if _, err := f.st.Decide(bg, c.Ref(), f.decision(c, "grace", false)); err != nil {
		t.Fatal(err)
	}
	want(stats(), 0, 1, 2, 0)
	if ok, _, err := f.st.Claim(bg, b.Ref(), claim(f.now, "tok")); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	want(stats(), 0, 1, 1, 1)
	// b is stuck once it has been executing for longer than the threshold.
	if s := stats(); s.Stuck != 0 {
		t.Fatalf("stuck = %d just after the claim", s.Stuck)
	}
	for at, n := range map[time.Duration]int64{approval.DefaultStuckAfter - time.Second: 0, approval.DefaultStuckAfter + time.Second: 1} {
		s, err := f.st.Stats(bg, []string{"p1", "p2"}, f.now.Add(at), 15*time.Minute)
		if err != nil || s.Stuck != n {
			t.Fatalf("stuck %s after the claim = %d (%v); want %d", at, s.Stuck, err, n)
		}
	}
	ft := approval.FinishTransition{Step: step(f.now, "succeeded"), Token: "tok", To: approval.StatusSucceeded}
	if _, err := f.st.Finish(bg, b.Ref(), ft); err != nil {
		t.Fatal(err)
	}
	want(stats(), 0, 1, 1, 0)

	// d's window ends within the horizon: it is about to expire.
	if s := stats(); s.ExpiringSoon != 0 {
		t.Fatalf("expiring soon = %d with every window an hour away", s.ExpiringSoon)
	}
	later, err := f.st.Stats(bg, []string{"p1", "p2"}, f.now.Add(50*time.Minute), 15*time.Minute)
	if err != nil || later.ExpiringSoon != 1 {
		t.Fatalf("expiring soon 10 minutes before the end = %d (%v); want 1 (d; a is approved)", later.ExpiringSoon, err)
	}

	// The sweep expires the approved a and the pending d.
	sw := approval.SweepTransition{Retention: time.Hour, DraftRetention: time.Minute,
		Event: approval.Event{Event: "expired", Actor: "system", Status: approval.StatusExpired}}
	evs, err := f.st.SweepExpired(bg, f.now.Add(2*time.Hour), sw)
	if err != nil || len(evs) != 2 {
		t.Fatalf("sweep: %d events, %v", len(evs), err)
	}
	for _, ev := range evs {
		if ev.Action != "test.effect" {
			t.Errorf("swept event of %s names action %q; want test.effect", ev.Operation, ev.Action)
		}
		if want := map[string]approval.Status{a.Key: approval.StatusApproved, d.Key: approval.StatusPending}[ev.Operation]; ev.From != want || ev.Principal == "" {
			t.Errorf("swept event of %s: from %q principal %q; want from %q and its principal", ev.Operation, ev.From, ev.Principal, want)
		}
	}
	want(stats(), 0, 0, 0, 0)
	if s := stats(); s.Stuck != 0 {
		t.Fatalf("stuck = %d with nothing executing", s.Stuck)
	}
}
