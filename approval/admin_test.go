package approval_test

import (
	"context"
	"strings"
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
	h.effect.block = make(chan struct{})
	h.run(t, 1)
	t.Cleanup(func() { close(h.effect.block) }) // before the workers are waited for
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
	settled, err := h.svc.AdminReconcile(bg, oncall, op.Key, approval.StatusFailed, "the target never got it")
	if err != nil || settled.Status != approval.StatusFailed || settled.Error == nil {
		t.Fatalf("reconcile: %+v %v", settled, err)
	}
	_, evs, err := h.svc.AdminGet(bg, oncall, op.Key)
	last := evs[len(evs)-1]
	if err != nil || last.Event != "reconciled" || last.Actor != "operator:oncall" || last.Details["note"] != "the target never got it" {
		t.Errorf("audit: %+v %v", last, err)
	}
	if _, err := h.svc.AdminReconcile(bg, oncall, op.Key, approval.StatusSucceeded, "again"); approval.ErrorCode(err) != approval.CodeInvalidState {
		t.Errorf("a second reconcile: %v", err)
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
