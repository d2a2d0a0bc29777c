package approval_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/approval"
)

func editable(r *approval.RouteRule) { r.AllowEdit = true }

func TestEditMakesANewVersionTheAgentFollows(t *testing.T) {
	h := newHarness(t, opts{route: editable})
	h.run(t, 2)
	op := h.prepare(t, 3)
	h.send(t, op.Key)
	link := h.inbox.link(t, "grace")

	v, next, err := h.svc.EditByLink(bg, link, map[string]string{"note": "hello, with the typo fixed"})
	if err != nil || next == nil {
		t.Fatalf("edit: %v", err)
	}
	if v.Op.Status != approval.StatusSuperseded || v.Op.SupersededBy != next.Key || next.Supersedes != op.Key {
		t.Fatalf("original %s superseded by %q; next supersedes %q", v.Op.Status, v.Op.SupersededBy, next.Supersedes)
	}
	if next.Status != approval.StatusPending || next.PayloadHash == op.PayloadHash || next.Principal != op.Principal {
		t.Fatalf("next: %s, same hash %v", next.Status, next.PayloadHash == op.PayloadHash)
	}
	if len(next.Preview.Diff) != 1 || next.Preview.Diff[0].Field != "note" {
		t.Fatalf("diff against the original: %+v", next.Preview.Diff)
	}
	// The agent, following the original, learns of the new version.
	cur := h.waitStatus(t, op.Key, approval.StatusSuperseded)
	view := approval.AgentView(cur, h.clock.Now())
	if view.SupersededBy != next.Key || !strings.Contains(view.NextStep, next.Key) || !strings.Contains(view.NextStep, "note") {
		t.Fatalf("next_step %q", view.NextStep)
	}
	// The old link decides nothing; the approvers get the new version.
	if _, res, _ := h.svc.DecideByLink(bg, link, true, ""); res.Outcome == approval.DecideApproved || res.Outcome == approval.DecideRecorded {
		t.Fatalf("the superseded version was approved: %v", res)
	}
	links := h.waitNotices(t, "grace", 2)
	if _, res, err := h.svc.DecideByLink(bg, links[1], true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("approve the new version: %v %v", res, err)
	}
	h.waitStatus(t, next.Key, approval.StatusSucceeded)
	h.effect.mu.Lock()
	defer h.effect.mu.Unlock()
	if len(h.effect.seen) != 1 || !strings.Contains(string(h.effect.seen[0]), "typo fixed") {
		t.Fatalf("ran %d times: %s", len(h.effect.seen), h.effect.seen)
	}
}

func TestEditorsApprovalCountsWhenTheRouteSaysSo(t *testing.T) {
	h := newHarness(t, opts{route: func(r *approval.RouteRule) { r.AllowEdit, r.EditorApproves = true, true }})
	h.run(t, 2)
	op := h.prepare(t, 3)
	h.send(t, op.Key)
	_, next, err := h.svc.EditByLink(bg, h.inbox.link(t, "grace"), map[string]string{"note": "edited"})
	if err != nil {
		t.Fatal(err)
	}
	if next.Status != approval.StatusApproved && next.Status != approval.StatusExecuting && next.Status != approval.StatusSucceeded {
		t.Fatalf("the editor's approval did not count: %s", next.Status)
	}
	h.waitStatus(t, next.Key, approval.StatusSucceeded)
}

// On a step_up route an edit carries no passkey assertion, so the editor's
// approval is not counted: the new version waits for a passkey decision.
func TestEditorsApprovalNeverSkipsStepUp(t *testing.T) {
	h := newHarness(t, opts{route: func(r *approval.RouteRule) {
		r.AllowEdit, r.EditorApproves, r.StepUp = true, true, "passkey"
	}})
	h.run(t, 2)
	op := h.prepare(t, 3)
	h.send(t, op.Key)
	_, next, err := h.svc.EditByLink(bg, h.inbox.link(t, "grace"), map[string]string{"note": "edited"})
	if err != nil {
		t.Fatal(err)
	}
	if next.Status != approval.StatusPending || len(next.Approvals) != 0 {
		t.Fatalf("the edit approved a step_up operation without a passkey: %s, %d approvals", next.Status, len(next.Approvals))
	}
}

func TestEditRefusals(t *testing.T) {
	h := newHarness(t, opts{required: 2, approvers: []string{"grace", "ada"}, route: editable})
	op := h.prepare(t, 3)
	h.send(t, op.Key)
	if err := h.svc.Reconcile(bg, op.Ref()); err != nil {
		t.Fatal(err)
	}
	g, a := h.inbox.link(t, "grace"), h.inbox.link(t, "ada")
	for name, changes := range map[string]map[string]string{
		"nothing changed": {"note": "hello"}, "not editable": {"n": "4"},
	} {
		if _, _, err := h.svc.EditByLink(bg, g, changes); approval.ErrorCode(err) != approval.CodeInvalidInput {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, res, _ := h.svc.DecideByLink(bg, g, true, ""); res.Outcome != approval.DecideRecorded {
		t.Fatal(res)
	}
	if v, next, _ := h.svc.EditByLink(bg, g, map[string]string{"note": "x"}); next != nil || v.Problem != approval.LinkUsed {
		t.Fatalf("grace edited after approving: %v", v.Problem)
	}
	if _, err := h.svc.Edit(bg, op.Key, "grace", "email", op.PayloadHash, map[string]string{"note": "x"}); err == nil {
		t.Fatal("grace edited after approving, without the page")
	}
	// Two editors at once: one new version.
	var wg sync.WaitGroup
	var mu sync.Mutex
	made := 0
	for _, note := range []string{"one", "two"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, next, err := h.svc.EditByLink(bg, a, map[string]string{"note": note}); err == nil && next != nil {
				mu.Lock()
				made++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if made != 1 {
		t.Fatalf("%d new versions", made)
	}
	// A route without allow_edit takes no edits.
	h2 := newHarness(t, opts{})
	op2 := h2.prepare(t, 1)
	h2.send(t, op2.Key)
	_ = h2.svc.Reconcile(bg, op2.Ref())
	if _, _, err := h2.svc.EditByLink(bg, h2.inbox.link(t, "grace"), map[string]string{"note": "x"}); approval.ErrorCode(err) != approval.CodeInvalidState {
		t.Fatalf("edit without allow_edit: %v", err)
	}
}
