package approval_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// An execution that hangs is surfaced: to operators as stuck, to the agent
// as a next step saying a human must settle it; an operator settles it,
// audited under their own name.
func TestStuckExecutionIsSurfacedAndSettledByAnOperator(t *testing.T) {
	bg := context.Background()
	h := newHarness(t, opts{})
	block := make(chan struct{})
	var unblock sync.Once
	h.effect.block = block
	h.run(t, 1)
	t.Cleanup(func() { unblock.Do(func() { close(block) }) }) // before the workers are waited for
	oncall := &approval.Operator{ID: "oncall", KeyHash: strings.TrimPrefix(approval.SHA256Hex([]byte("cso_k")), "sha256:")}
	h.svc.Policy().Operators = append(h.svc.Policy().Operators, oncall)

	op := h.prepare(t, 1)
	h.send(t, op.Key)
	if _, res, err := h.svc.DecideByLink(bg, h.inbox.link(t, "grace"), true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("decide: %v %v", res, err)
	}
	cur := h.waitStatus(t, op.Key, approval.StatusExecuting) // the effect hangs
	if v := approval.AgentView(cur, h.svc.Now()); strings.Contains(v.NextStep, "Stuck") {
		t.Errorf("stuck right after the claim: %s", v.NextStep)
	}
	if list, err := h.svc.AdminList(bg, oncall, approval.AdminQuery{Stuck: true}); err != nil || len(list) != 0 {
		t.Errorf("stuck list right after the claim: %v %v", list, err)
	}

	h.clock.Add(approval.DefaultStuckAfter + time.Second)
	list, err := h.svc.AdminList(bg, oncall, approval.AdminQuery{Stuck: true})
	if err != nil || len(list) != 1 || list[0].Key != op.Key {
		t.Fatalf("stuck list: %v %v", list, err)
	}
	v := approval.AgentView(list[0], h.svc.Now())
	if !strings.Contains(v.NextStep, "outcome is unknown") || !strings.Contains(v.NextStep, "operator") || v.Status != approval.StatusExecuting {
		t.Errorf("next step of a stuck operation: %s", v.NextStep)
	}
	if ov := approval.OperatorView(list[0], h.svc.Now()); !ov.Stuck || ov.Principal != "agent" || ov.Route != "test" {
		t.Errorf("operator view: %+v", ov)
	}
	if list, _ := h.svc.AdminList(bg, oncall, approval.AdminQuery{Stuck: true, OlderThan: time.Hour}); len(list) != 0 {
		t.Errorf("stuck for more than an hour: %v", list)
	}

	for _, bad := range []struct {
		outcome approval.Status
		note    string
		field   string
	}{{approval.StatusSucceeded, "  ", "note"}, {"maybe", "checked", "outcome"}, {approval.StatusFailed, strings.Repeat("x", approval.MaxNoteLength+1), "note"}} {
		_, err := h.svc.AdminReconcile(bg, oncall, op.Key, bad.outcome, bad.note)
		if approval.ErrorCode(err) != approval.CodeInvalidInput || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("reconcile %q %q: %v", bad.outcome, bad.note, err)
		}
	}
	// Its executor is alive (it renews its lease): the operator cannot say
	// it failed, only that the outcome is unknown.
	_, err = h.svc.AdminReconcile(bg, oncall, op.Key, approval.StatusFailed, "the target never got it")
	var ae *approval.Error
	if !errors.As(err, &ae) || ae.Code != approval.CodeInvalidState || ae.Details["lease_remaining_seconds"] == nil {
		t.Fatalf("reconcile as failed while the executor holds its lease: %v", err)
	}
	settled, err := h.svc.AdminReconcile(bg, oncall, op.Key, approval.OutcomeUnknown, "the target shows nothing yet")
	if err != nil || settled.Status != approval.StatusFailed || settled.Error == nil || settled.Error.OutcomeUnknown == nil || !*settled.Error.OutcomeUnknown {
		t.Fatalf("reconcile: %+v %v", settled, err)
	}
	if v := approval.AgentView(settled, h.svc.Now()); strings.Contains(v.NextStep, "before anything was sent") || strings.Contains(v.NextStep, "may prepare it again") {
		t.Errorf("next step of an unknown settlement: %s", v.NextStep)
	}
	_, evs, err := h.svc.AdminGet(bg, oncall, op.Key)
	last := evs[len(evs)-1]
	if err != nil || last.Event != "reconciled" || last.Actor != "operator:oncall" || last.Details["note"] != "the target shows nothing yet" ||
		last.Details["outcome"] != "unknown" {
		t.Errorf("audit: %+v %v", last, err)
	}
	if _, err := h.svc.AdminReconcile(bg, oncall, op.Key, approval.StatusSucceeded, "again"); approval.ErrorCode(err) != approval.CodeInvalidState {
		t.Errorf("a second reconcile: %v", err)
	}
	// The executor resumes: its re-check finds the claim settled, so the
	// effect never runs, and what it found is kept as the late outcome.
	unblock.Do(func() { close(block) })
	cur = waitLate(t, h, op.Key)
	if n := h.effect.runs.Load(); n != 0 {
		t.Fatalf("the effect ran %d times after the settlement", n)
	}
	if cur.Status != approval.StatusFailed || cur.LateOutcome.Status != approval.StatusFailed || cur.LateOutcome.Error.Details["phase"] != "fence" {
		t.Fatalf("late outcome: %s %+v", cur.Status, cur.LateOutcome)
	}
	v = approval.AgentView(cur, h.svc.Now())
	if !strings.Contains(string(v.Result), `"late_outcome"`) || !strings.Contains(v.NextStep, "sent nothing") {
		t.Errorf("agent view of the late outcome: %s / %s", v.Result, v.NextStep)
	}
}

// waitLate waits until the operation has a late outcome.
func waitLate(t *testing.T, h *harness, key string) *approval.Operation {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		op, err := h.svc.Get(context.Background(), nil, key)
		if err != nil {
			t.Fatal(err)
		}
		if op.LateOutcome != nil {
			return op
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no late outcome")
	return nil
}

// An executor paused after its re-check, with its write on the wire, past
// its lease: the operator may then settle it as failed (nothing is at the
// target yet), the write lands when it resumes, and its outcome is kept as
// late_outcome; the agent is told it happened, not to prepare it again.
func TestPausedExecutorsLateWriteIsRecorded(t *testing.T) {
	bg := context.Background()
	h := newHarness(t, opts{execLease: 300 * time.Millisecond})
	wire := make(chan struct{})
	var release sync.Once
	h.effect.wire = wire
	h.run(t, 1)
	t.Cleanup(func() { h.paused.paused.Store(false); release.Do(func() { close(wire) }) })
	oncall := &approval.Operator{ID: "oncall"}
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	if _, res, err := h.svc.DecideByLink(bg, h.inbox.link(t, "grace"), true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("decide: %v %v", res, err)
	}
	h.waitStatus(t, op.Key, approval.StatusExecuting)
	// The write is on its way (past the re-check); the process stops.
	time.Sleep(50 * time.Millisecond)
	h.paused.paused.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	var settled *approval.Operation
	var err error
	for time.Now().Before(deadline) {
		settled, err = h.svc.AdminReconcile(bg, oncall, op.Key, approval.StatusFailed, "nothing at the target")
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || settled.Status != approval.StatusFailed {
		t.Fatalf("settle after the lease passed: %v", err)
	}
	if v := approval.AgentView(settled, h.svc.Now()); strings.Contains(v.NextStep, "before anything was sent") {
		t.Errorf("next step of an operator's failed: %s", v.NextStep)
	}
	// The process resumes: the write lands.
	h.paused.paused.Store(false)
	release.Do(func() { close(wire) })
	cur := waitLate(t, h, op.Key)
	if n := h.effect.runs.Load(); n != 1 {
		t.Fatalf("effect ran %d times", n)
	}
	if cur.Status != approval.StatusFailed || cur.LateOutcome.Status != approval.StatusSucceeded {
		t.Fatalf("terminal state changed or late outcome wrong: %s %+v", cur.Status, cur.LateOutcome)
	}
	v := approval.AgentView(cur, h.svc.Now())
	if !strings.Contains(v.NextStep, "did happen") || strings.Contains(v.NextStep, "may prepare it again") {
		t.Errorf("next step: %s", v.NextStep)
	}
	_, evs, _ := h.svc.AdminGet(bg, oncall, op.Key)
	if last := evs[len(evs)-1]; last.Event != "late_outcome" || last.Details["status"] != "succeeded" {
		t.Errorf("audit: %+v", last)
	}
}

// An executor paused before its re-check, past its lease: it resumes to
// find its claim fenced (no operator needed) and records that nothing was
// sent, truthfully.
func TestPausedExecutorIsFencedAfterItsLease(t *testing.T) {
	bg := context.Background()
	h := newHarness(t, opts{execLease: 300 * time.Millisecond})
	block := make(chan struct{})
	var unblock sync.Once
	h.effect.block = block
	h.run(t, 1)
	t.Cleanup(func() { h.paused.paused.Store(false); unblock.Do(func() { close(block) }) })
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	if _, res, err := h.svc.DecideByLink(bg, h.inbox.link(t, "grace"), true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("decide: %v %v", res, err)
	}
	h.waitStatus(t, op.Key, approval.StatusExecuting)
	h.paused.paused.Store(true)
	time.Sleep(600 * time.Millisecond) // past the lease
	h.paused.paused.Store(false)
	unblock.Do(func() { close(block) })
	cur := h.waitStatus(t, op.Key, approval.StatusFailed)
	if n := h.effect.runs.Load(); n != 0 {
		t.Fatalf("effect ran %d times after its lease passed", n)
	}
	if cur.Error == nil || cur.Error.Details["phase"] != "fence" || cur.Error.OutcomeUnknown == nil || *cur.Error.OutcomeUnknown {
		t.Fatalf("error: %+v", cur.Error)
	}
}

func TestOperatorCancelAndKeys(t *testing.T) {
	bg := context.Background()
	h := newHarness(t, opts{})
	hash := func(k string) string { return strings.TrimPrefix(approval.SHA256Hex([]byte(k)), "sha256:") }
	h.agent.KeyHash = hash("cs_agent")
	h.svc.Policy().Operators = []*approval.Operator{{ID: "oncall", KeyHash: hash("cso_oncall")}}

	o, err := h.svc.AuthenticateOperator("cso_oncall")
	if err != nil || o.ID != "oncall" {
		t.Fatalf("operator key: %v %v", o, err)
	}
	if _, err := h.svc.AuthenticateOperator("cs_agent"); approval.ErrorCode(err) != approval.CodeUnauthenticated || !strings.Contains(err.Error(), "agent's API key") {
		t.Errorf("an agent's key as an operator key: %v", err)
	}
	if _, err := h.svc.Authenticate("cso_oncall"); approval.ErrorCode(err) != approval.CodeUnauthenticated {
		t.Errorf("an operator key as an agent's key: %v", err)
	}
	for _, k := range []string{"", "cso_wrong"} {
		if _, err := h.svc.AuthenticateOperator(k); approval.ErrorCode(err) != approval.CodeUnauthenticated {
			t.Errorf("operator key %q: %v", k, err)
		}
	}

	draft := h.prepare(t, 2)
	if list, err := h.svc.AdminList(bg, o, approval.AdminQuery{Status: approval.StatusDraft, Principal: "agent"}); err != nil || len(list) != 1 {
		t.Errorf("admin list: %v %v", list, err)
	}
	for _, q := range []approval.AdminQuery{{Status: "bogus"}, {Stuck: true, Status: approval.StatusDraft}, {Stuck: true, OlderThan: -time.Second}} {
		if _, err := h.svc.AdminList(bg, o, q); approval.ErrorCode(err) != approval.CodeInvalidInput {
			t.Errorf("admin list %+v: %v", q, err)
		}
	}
	c, err := h.svc.AdminCancel(bg, o, draft.Key)
	if err != nil || c.Status != approval.StatusCanceled {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	_, evs, _ := h.svc.AdminGet(bg, o, draft.Key)
	if last := evs[len(evs)-1]; last.Event != "canceled" || last.Actor != "operator:oncall" {
		t.Errorf("audit of the cancel: %+v", last)
	}
	if _, _, err := h.svc.AdminGet(bg, o, "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"); approval.ErrorCode(err) != approval.CodeNotFound {
		t.Errorf("unknown operation: %v", err)
	}
}
