package approval_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

func TestStatusChangesFollowTheLifecycleForward(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ev := func(name string, st approval.Status) approval.Event {
		at = at.Add(time.Second)
		return approval.Event{Event: name, Status: st, Time: at}
	}
	unknown := true
	op := &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: "email.send",
		Error: &approval.OpError{Code: approval.CodeExecutionFailed, OutcomeUnknown: &unknown}}
	trail := []approval.Event{
		ev("prepared", approval.StatusDraft),
		ev("sent", approval.StatusPending),
		ev("notified", approval.StatusPending),
		ev("approval", approval.StatusPending),
		ev("approved", approval.StatusApproved),
		ev("notified", approval.StatusPending), // written from a read before the approval
		ev("executing", approval.StatusExecuting),
		ev("failed", approval.StatusFailed),
		ev("notified", approval.StatusApproved),
	}
	got := approval.StatusChanges(op, trail)
	want := []struct {
		st, prev approval.Status
		id       string
	}{
		{approval.StatusPending, approval.StatusDraft, op.Key + ".1"},
		{approval.StatusApproved, approval.StatusPending, op.Key + ".2"},
		{approval.StatusExecuting, approval.StatusApproved, op.Key + ".3"},
		{approval.StatusFailed, approval.StatusExecuting, op.Key + ".4"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d changes: %+v", len(got), got)
	}
	for i, w := range want {
		if g := got[i]; g.Status != w.st || g.Previous != w.prev || g.ID != w.id || g.Seq != i+1 || g.Operation != op.Key || g.Action != "email.send" {
			t.Errorf("change %d = %+v, want %s from %s (%s)", i+1, g, w.st, w.prev, w.id)
		}
	}
	if last := got[3]; last.Code != "execution_failed" || last.OutcomeUnknown == nil || !*last.OutcomeUnknown || !last.At.Equal(trail[7].Time) {
		t.Errorf("the failure's change = %+v", last)
	}
	// A draft that expired unsent has one change; one that is still a
	// draft has none.
	if c := approval.StatusChanges(op, []approval.Event{ev("prepared", approval.StatusDraft), ev("expired", approval.StatusExpired)}); len(c) != 1 ||
		c[0].Status != approval.StatusExpired || c[0].Previous != approval.StatusDraft {
		t.Errorf("expired draft: %+v", c)
	}
	if c := approval.StatusChanges(op, trail[:1]); len(c) != 0 {
		t.Errorf("a draft: %+v", c)
	}
}
