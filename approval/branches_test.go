package approval_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
)

// The guards of a decision hold for every approver, not only the first:
// eligibility (not an approver, the human the agent acts for, decided
// before, another payload) and step-up, checked again for the second and
// third approvers after others have decided.

// eligibilityBranches asserts that op, with approvals so far, refuses each
// kind of ineligible decision and stays as it was.
func eligibilityBranches(t *testing.T, h *harness, key string, decided []string, selfID string) {
	t.Helper()
	before, err := h.store.Get(bg, approval.Ref{Principal: "agent", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	for _, approve := range []bool{true, false} {
		if _, _, err := h.svc.DecideAs(bg, key, "mallory", "slack", before.PayloadHash, approve, ""); !isRefusal(err, "not an approver") {
			t.Fatalf("after %v: mallory (approve %v): %v", decided, approve, err)
		}
		if selfID != "" {
			if _, _, err := h.svc.DecideAs(bg, key, selfID, "slack", before.PayloadHash, approve, ""); !isRefusal(err, "on your behalf") {
				t.Fatalf("after %v: %s, for whom the agent acts (approve %v): %v", decided, selfID, approve, err)
			}
		}
		for _, who := range decided {
			if _, res, err := h.svc.DecideAs(bg, key, who, "slack", before.PayloadHash, approve, ""); err != nil || res.Outcome != approval.DecideAlreadyDecided {
				t.Fatalf("after %v: %s again (approve %v): %v %v", decided, who, approve, res.Outcome, err)
			}
		}
	}
	after, err := h.store.Get(bg, before.Ref())
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != before.Status || len(after.Approvals) != len(decided) || after.Version != before.Version {
		t.Fatalf("refused decisions changed the operation: %s → %s, %d approvals, v%d → v%d",
			before.Status, after.Status, len(after.Approvals), before.Version, after.Version)
	}
}

func isRefusal(err error, words string) bool {
	var r *approval.Refusal
	return errors.As(err, &r) && strings.Contains(r.Reason, words)
}

func TestEligibilityBranchesForEveryApprover(t *testing.T) {
	h := newHarness(t, opts{required: 2, approvers: []string{"grace", "ada", "sam"}, forbidSelf: true})
	op := h.prepare(t, 1)
	op = h.send(t, op.Key)
	var decided []string
	for i, who := range []string{"grace", "ada"} {
		eligibilityBranches(t, h, op.Key, decided, "sam")
		// Another payload than the one stored is never counted.
		if _, res, err := h.svc.DecideAs(bg, op.Key, who, "slack", "sha256:"+strings.Repeat("0", 64), true, ""); err != nil ||
			res.Outcome != approval.DecideHashMismatch {
			t.Fatalf("%s with another payload: %v %v", who, res.Outcome, err)
		}
		cur, res, err := h.svc.DecideAs(bg, op.Key, who, "slack", op.PayloadHash, true, "")
		want := approval.DecideRecorded
		if i == 1 {
			want = approval.DecideApproved
		}
		if err != nil || res.Outcome != want || len(cur.Approvals) != i+1 {
			t.Fatalf("%s: %v %v (%d approvals)", who, res.Outcome, err, len(cur.Approvals))
		}
		decided = append(decided, who)
	}
	// After the quorum nobody else decides, not even an approver who has not.
	h2 := newHarness(t, opts{required: 1, approvers: []string{"grace", "ada"}})
	op2 := h2.send(t, h2.prepare(t, 1).Key)
	if _, res, _ := h2.svc.DecideAs(bg, op2.Key, "grace", "slack", op2.PayloadHash, true, ""); res.Outcome != approval.DecideApproved {
		t.Fatal(res.Outcome)
	}
	if _, res, err := h2.svc.DecideAs(bg, op2.Key, "ada", "slack", op2.PayloadHash, false, "no"); err != nil || res.Outcome != approval.DecideNotPending {
		t.Fatalf("ada's rejection after the quorum: %v %v", res.Outcome, err)
	}
}

// passkeysFake plays the WebAuthn relying party: an assertion is
// "credential id|sign count|base64 of the challenge it signs". It checks
// what package passkey checks that the service depends on: the challenge,
// and that the credential is one of the approver's.
type passkeysFake struct{}

func (passkeysFake) Origin() string { return "http://countersign.test" }
func (passkeysFake) CreationOptions(*approval.Approver, []byte, []approval.PasskeyCredential) ([]byte, error) {
	return []byte("{}"), nil
}
func (passkeysFake) Register(*approval.Approver, []byte, []approval.PasskeyCredential, []byte) (approval.PasskeyCredential, error) {
	return approval.PasskeyCredential{}, errors.New("not in these tests")
}
func (passkeysFake) RequestOptions(*approval.Approver, []byte, []approval.PasskeyCredential) ([]byte, error) {
	return []byte("{}"), nil
}
func (passkeysFake) Check(a *approval.Approver, challenge []byte, creds []approval.PasskeyCredential, raw []byte) (approval.PasskeyUse, error) {
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 {
		return approval.PasskeyUse{}, &approval.StepUpError{Code: "invalid", Reason: "not an assertion"}
	}
	if parts[2] != base64.RawURLEncoding.EncodeToString(challenge) {
		return approval.PasskeyUse{}, &approval.StepUpError{Code: "challenge", Reason: "signed another challenge"}
	}
	n, _ := strconv.Atoi(parts[1])
	for _, c := range creds {
		if bytes.Equal(c.ID, []byte(parts[0])) {
			return approval.PasskeyUse{CredentialID: c.ID, SignCount: uint32(n)}, nil
		}
	}
	return approval.PasskeyUse{}, &approval.StepUpError{Code: "unknown_credential", Reason: "not one of the approver's passkeys"}
}

func assertion(cred string, count int, op *approval.Operation, approve bool, approver string) context.Context {
	ch := approval.DecisionChallenge(op.Key, op.PayloadHash, approve, approver)
	return approval.WithPasskeyAssertion(bg, []byte(cred+"|"+strconv.Itoa(count)+"|"+base64.RawURLEncoding.EncodeToString(ch)))
}

func TestStepUpBranchesForEveryApprover(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	st := store.New(rdb, nil)
	t.Cleanup(func() { _ = st.Close() })
	agent := &approval.Principal{ID: "agent", Scopes: []string{"test.effect"},
		Quotas: approval.Quotas{MaxDrafts: 100, MaxPending: 100, MaxStoredBytes: 1 << 30, RequestsPerMinute: 1e6, SendsPerMinute: 1e6}}
	policy := &approval.Policy{Principals: []*approval.Principal{agent},
		Approvers: []*approval.Approver{{ID: "grace", Email: "grace@example.com"}, {ID: "ada", Email: "ada@example.com"},
			{ID: "lin", Email: "lin@example.com"}},
		Routes: []approval.RouteRule{{Name: "stepup", Match: approval.Match{Action: "test.effect"}, ApproverIDs: []string{"grace", "ada", "lin"},
			Required: 3, Notify: []string{"console"}, StepUp: approval.StepUpPasskey}}}
	clk, ib := newClock(), newInbox()
	svc, err := approval.NewService(approval.Config{Store: st, Policy: policy, Actions: []approval.Action{&effect{}},
		Notifiers: map[string]approval.Notifier{"console": ib}, Links: approval.RandomKeyring(),
		PublicURL: "http://countersign.test", Now: clk.Now, Writes: func() bool { return true }, Passkeys: passkeysFake{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"grace", "ada", "lin"} {
		if err := st.AddEnrolment(bg, who, "n-"+who, time.Hour); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.Enrol(bg, who, "n-"+who, approval.PasskeyCredential{ID: []byte("cred-" + who), PublicKey: []byte("k"), Created: clk.Now()}); err != nil || !ok {
			t.Fatalf("enrol %s: %v %v", who, ok, err)
		}
	}
	op, _, err := svc.Prepare(bg, agent, approval.PrepareCall{Action: "test.effect", Input: []byte(`{"n":1,"note":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if op, err = svc.Send(bg, agent, op.Key); err != nil {
		t.Fatal(err)
	}
	approvals := func() int {
		cur, err := st.Get(bg, op.Ref())
		if err != nil || cur.Status != approval.StatusPending {
			t.Fatalf("status %v %v", cur, err)
		}
		return len(cur.Approvals)
	}
	decide := func(ctx context.Context, who string, approve bool) (approval.DecideResult, error) {
		_, res, err := svc.DecideAs(ctx, op.Key, who, "email", op.PayloadHash, approve, "")
		return res, err
	}
	// The page's path refuses the same way, and says so.
	if err := svc.Reconcile(bg, op.Ref()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.DecideByLink(bg, ib.link(t, "grace"), true, ""); !isRefusal(err, "needs your passkey") {
		t.Fatalf("grace by her link without a passkey: %v", err)
	}
	for i, who := range []string{"grace", "ada", "lin"} {
		refusals := map[string]struct {
			ctx     context.Context
			approve bool
			words   string
		}{
			"no assertion":                    {bg, true, "needs your passkey"},
			"no assertion, rejecting":         {bg, false, "needs your passkey"},
			"another approver's passkey":      {assertion("cred-grace", 9, op, true, who), true, ""},
			"signed for the other decision":   {assertion("cred-"+who, 9, op, false, who), true, "another decision"},
			"signed for another approver":     {assertion("cred-"+who, 9, op, true, "mallory"), true, "another decision"},
			"the rejection's for an approval": {assertion("cred-"+who, 9, op, true, who), false, "another decision"},
		}
		for name, r := range refusals {
			if who == "grace" && name == "another approver's passkey" {
				continue // it is hers
			}
			if _, err := decide(r.ctx, who, r.approve); !isRefusal(err, r.words) {
				t.Fatalf("%s (approver %d), %s: %v", who, i+1, name, err)
			}
			if n := approvals(); n != i {
				t.Fatalf("%s, %s: %d approvals, want %d", who, name, n, i)
			}
		}
		res, err := decide(assertion("cred-"+who, 1, op, true, who), who, true)
		want := approval.DecideRecorded
		if i == 2 {
			want = approval.DecideApproved
		}
		if err != nil || res.Outcome != want {
			t.Fatalf("%s with a passkey: %v %v", who, res.Outcome, err)
		}
		if i < 2 && approvals() != i+1 {
			t.Fatalf("%s's approval was not counted", who)
		}
		// A decision the store refuses anyway needs no passkey: the
		// approver learns why (decided before, another payload).
		if _, res, err := svc.DecideAs(bg, op.Key, who, "email", op.PayloadHash, false, ""); err != nil || res.Outcome != approval.DecideAlreadyDecided &&
			!(i == 2 && res.Outcome == approval.DecideNotPending) {
			t.Fatalf("%s again, without a passkey: %v %v", who, res.Outcome, err)
		}
		if i < 2 {
			next := []string{"ada", "lin"}[i]
			if _, res, err := svc.DecideAs(bg, op.Key, next, "email", "sha256:other", true, ""); err != nil || res.Outcome != approval.DecideHashMismatch {
				t.Fatalf("%s with another payload, without a passkey: %v %v", next, res.Outcome, err)
			}
		}
	}
	// After a rejection, the others are told it is no longer pending.
	op2, _, err := svc.Prepare(bg, agent, approval.PrepareCall{Action: "test.effect", Input: []byte(`{"n":2,"note":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if op2, err = svc.Send(bg, agent, op2.Key); err != nil {
		t.Fatal(err)
	}
	if _, res, err := svc.DecideAs(assertion("cred-grace", 2, op2, false, "grace"), op2.Key, "grace", "email", op2.PayloadHash, false, "no"); err != nil ||
		res.Outcome != approval.DecideRejected {
		t.Fatalf("grace rejects: %v %v", res.Outcome, err)
	}
	if _, res, err := svc.DecideAs(bg, op2.Key, "ada", "email", op2.PayloadHash, true, ""); err != nil || res.Outcome != approval.DecideNotPending {
		t.Fatalf("ada after the rejection, without a passkey: %v %v", res.Outcome, err)
	}
	// The refusals and the verified step-ups are in the audit trail.
	evs, err := st.Events(bg, op.Ref())
	if err != nil {
		t.Fatal(err)
	}
	refused, verified := 0, 0 // on op
	for _, e := range evs {
		switch e.Event {
		case "step_up_refused":
			refused++
		case "step_up":
			verified++
		}
	}
	if refused != 1+5+6+6 || verified != 3 {
		t.Fatalf("audited %d refused and %d verified step-ups", refused, verified)
	}
}

// TestOpenLinkBranchOperationGone: a link whose operation no longer exists
// (its retention ended) is unknown, not an error.
func TestOpenLinkBranchOperationGone(t *testing.T) {
	h := newHarness(t, opts{})
	op := h.send(t, h.prepare(t, 1).Key)
	if err := h.svc.Reconcile(bg, op.Ref()); err != nil {
		t.Fatal(err)
	}
	link := h.inbox.link(t, "grace")
	rdb := h.store.Client()
	keys, err := rdb.Keys(bg, "cs:*:"+op.Key+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v %v", keys, err)
	}
	if err := rdb.Del(bg, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := h.svc.OpenLink(bg, link)
	if err != nil || v.Problem != approval.LinkUnknown || v.Op != nil {
		t.Fatalf("open: %+v %v", v, err)
	}
	if v, res, err := h.svc.DecideByLink(bg, link, true, ""); err != nil || v.Problem != approval.LinkUnknown || res.Outcome != "" {
		t.Fatalf("decide: %+v %v %v", v, res, err)
	}
}

// failingAllowances is the real store whose AddAllowance fails, as Redis
// refusing a write would.
type failingAllowances struct{ *store.Redis }

func (failingAllowances) AddAllowance(context.Context, approval.Allowance) error {
	return errors.New("OOM command not allowed when used memory > 'maxmemory'")
}

// TestGrantBranchActivationFails: an approved allowance.grant whose
// activation the store refuses fails; it never reads as succeeded, and
// nothing is approved by it.
func TestGrantBranchActivationFails(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	real := store.New(rdb, nil)
	t.Cleanup(func() { _ = real.Close() })
	st := failingAllowances{real}
	agent := &approval.Principal{ID: "agent", Scopes: []string{"test.effect"},
		Quotas: approval.Quotas{MaxDrafts: 100, MaxPending: 100, MaxStoredBytes: 1 << 30, RequestsPerMinute: 1e6, SendsPerMinute: 1e6}}
	policy := &approval.Policy{Principals: []*approval.Principal{agent},
		Approvers: []*approval.Approver{{ID: "grace", Email: "grace@example.com"}},
		Routes: []approval.RouteRule{{Name: "test", Match: approval.Match{Action: "test.effect"}, ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}},
			{Name: "allowances", Match: approval.Match{Action: approval.GrantAction}, ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}}}}
	svc, err := approval.NewService(approval.Config{Store: st, Policy: policy, Actions: []approval.Action{&effect{}},
		Notifiers: map[string]approval.Notifier{"console": newInbox()}, Links: approval.RandomKeyring(),
		PublicURL: "http://countersign.test", Now: newClock().Now, Writes: func() bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() { defer close(done); svc.RunWorkers(ctx, real, "w", 1) }()
	t.Cleanup(func() { cancel(); <-done })
	op, _, err := svc.RequestAllowance(bg, agent, []byte(`{"action":"test.effect","budget":{"count":3},"ttl":"1h","reason":"r"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, res, err := svc.DecideAs(bg, op.Key, "grace", "email", op.PayloadHash, true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("approve: %v %v", res.Outcome, err)
	}
	var cur *approval.Operation
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cur, err = real.Get(bg, op.Ref()); err == nil && cur.Status.Terminal() {
			break
		}
	}
	if cur == nil || cur.Status != approval.StatusFailed || cur.Error == nil || cur.Error.Code != approval.CodeExecutionFailed ||
		!strings.Contains(cur.Error.Message, "could not be activated") {
		t.Fatalf("after a failed activation: %+v", cur)
	}
	if all, _ := real.Allowances(bg, "agent"); len(all) != 0 {
		t.Fatalf("allowances %+v", all)
	}
}
