package approval_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
)

// The one rule of who may decide what, when: each refusal, with its code,
// and the order in which they are checked.
func TestMayDecideRefusals(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	const hash = "sha256:1"
	pending := func(edit func(*approval.Operation)) *approval.Operation {
		op := &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Status: approval.StatusPending, PayloadHash: hash,
			OnBehalfOf: "sam", ExpiresAt: now.Add(time.Hour),
			Route: approval.Route{Approvers: []string{"grace", "ada"}, Required: 2, ForbidSelfApproval: true}}
		if edit != nil {
			edit(op)
		}
		return op
	}
	approved := func(op *approval.Operation) {
		op.Approvals = []approval.Decision{{Approver: "grace", Via: "email", At: now.Add(-time.Minute)}}
	}
	for _, tc := range []struct {
		name     string
		op       *approval.Operation
		approver string
		hash     string
		want     approval.RefusalCode // "" may decide
	}{
		{"may decide", pending(nil), "grace", hash, ""},
		{"escalated to", pending(func(op *approval.Operation) { op.Escalated = &approval.Escalated{Approvers: []string{"lin"}} }), "lin", hash, ""},
		{"not on the route", pending(nil), "eve", hash, approval.RefusedNotApprover},
		{"self-approval", pending(nil), "sam", hash, approval.RefusedSelfApproval},
		{"self, where allowed, is just not an approver", pending(func(op *approval.Operation) { op.Route.ForbidSelfApproval = false }), "sam", hash, approval.RefusedNotApprover},
		{"approved already", pending(approved), "grace", hash, approval.RefusedDecided},
		{"rejected already", pending(func(op *approval.Operation) {
			op.Status = approval.StatusRejected
			op.Rejection = &approval.Decision{Approver: "grace", Via: "teams"}
		}), "grace", hash, approval.RefusedDecided},
		{"expired, recorded", pending(func(op *approval.Operation) { op.Status = approval.StatusExpired }), "grace", hash, approval.RefusedExpired},
		{"expired by the clock", pending(func(op *approval.Operation) { op.ExpiresAt = now }), "grace", hash, approval.RefusedExpired},
		{"approved by others", pending(func(op *approval.Operation) { op.Status = approval.StatusApproved }), "grace", hash, approval.RefusedNotPending},
		{"succeeded, past its window", pending(func(op *approval.Operation) {
			op.Status = approval.StatusSucceeded
			op.ExpiresAt = now.Add(-time.Hour)
		}), "grace", hash, approval.RefusedNotPending},
		{"draft", pending(func(op *approval.Operation) { op.Status = approval.StatusDraft }), "grace", hash, approval.RefusedNotPending},
		{"another payload", pending(nil), "grace", "sha256:2", approval.RefusedHashMismatch},
		// Order: the person first, then their decision, then the state.
		{"stranger on a finished operation", pending(func(op *approval.Operation) { op.Status = approval.StatusSucceeded }), "eve", hash, approval.RefusedNotApprover},
		{"decided and expired", pending(func(op *approval.Operation) { approved(op); op.ExpiresAt = now }), "grace", "sha256:2", approval.RefusedDecided},
		{"expired and another payload", pending(func(op *approval.Operation) { op.ExpiresAt = now }), "grace", "sha256:2", approval.RefusedExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := approval.MayDecide(tc.op, tc.approver, tc.hash, now)
			if got := approval.RefusalOf(err); got != tc.want || (err == nil) != (tc.want == "") {
				t.Fatalf("MayDecide: %v (code %q), want %q", err, got, tc.want)
			}
			if err != nil && err.Error() == "" {
				t.Fatal("a refusal without a reason")
			}
		})
	}
}

// Eligibility reads the operation and adds what only the service knows: a
// chat decision on a step-up route is refused (no_passkey for an approver
// without one), a page decision is not. Every refusal of the rule is one
// the decide script gives too, when the decision is attempted.
func TestEligibility(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	st := store.New(rdb, nil)
	t.Cleanup(func() { _ = st.Close() })
	agent := &approval.Principal{ID: "agent", Scopes: []string{"test.effect"}, OnBehalfOf: "sam",
		Quotas: approval.Quotas{MaxDrafts: 100, MaxPending: 100, MaxStoredBytes: 1 << 30, RequestsPerMinute: 1e6, SendsPerMinute: 1e6}}
	keyed := *agent
	keyed.ID = "agent-passkey"
	policy := &approval.Policy{Principals: []*approval.Principal{agent, &keyed},
		Approvers: []*approval.Approver{{ID: "grace", Email: "grace@example.com"}, {ID: "ada", Email: "ada@example.com"},
			{ID: "lin", Email: "lin@example.com"}, {ID: "sam", Email: "sam@example.com"}},
		Routes: []approval.RouteRule{
			{Name: "stepup", Match: approval.Match{Action: "test.effect", Principal: "agent-passkey"},
				ApproverIDs: []string{"grace", "lin"}, Required: 2, Notify: []string{"console"}, StepUp: approval.StepUpPasskey},
			{Name: "plain", Match: approval.Match{Action: "test.effect"}, ApproverIDs: []string{"grace", "ada", "sam"},
				Required: 2, Notify: []string{"console"}, ForbidSelfApproval: true}}}
	clk := newClock()
	svc, err := approval.NewService(approval.Config{Store: st, Policy: policy, Actions: []approval.Action{&effect{}},
		Notifiers: map[string]approval.Notifier{"console": newInbox()}, Links: approval.RandomKeyring(),
		PublicURL: "http://countersign.test", Now: clk.Now, Writes: func() bool { return true }, Passkeys: passkeysFake{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddEnrolment(bg, "grace", "n-grace", time.Hour); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Enrol(bg, "grace", "n-grace", approval.PasskeyCredential{ID: []byte("cred-grace"), PublicKey: []byte("k"), Created: clk.Now()}); err != nil || !ok {
		t.Fatalf("enrol: %v %v", ok, err)
	}
	send := func(p *approval.Principal) *approval.Operation {
		op, _, err := svc.Prepare(bg, p, approval.PrepareCall{Action: "test.effect", Input: []byte(`{"n":1,"note":"x"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if op, err = svc.Send(bg, p, op.Key); err != nil {
			t.Fatal(err)
		}
		return op
	}
	stepUp, plain := send(&keyed), send(agent)
	if stepUp.Route.StepUp == "" || plain.Route.StepUp != "" {
		t.Fatalf("routes: %q %q", stepUp.Route.Name, plain.Route.Name)
	}
	check := func(op *approval.Operation, who, hash string, how approval.Means, want approval.RefusalCode) {
		t.Helper()
		got, err := svc.Eligibility(bg, op.Key, who, hash, how)
		if code := approval.RefusalOf(err); code != want || (err == nil) != (want == "") {
			t.Errorf("%s on %s (means %d): %v (code %q), want %q", who, op.Route.Name, how, err, code, want)
		}
		if got == nil || got.Key != op.Key {
			t.Errorf("%s on %s: no operation to explain with", who, op.Route.Name)
		}
	}
	check(stepUp, "grace", stepUp.PayloadHash, approval.OnPage, "")
	check(stepUp, "grace", stepUp.PayloadHash, approval.InChat, approval.RefusedStepUp)
	check(stepUp, "lin", stepUp.PayloadHash, approval.InChat, approval.RefusedNoPasskey)
	check(stepUp, "ada", stepUp.PayloadHash, approval.OnPage, approval.RefusedNotApprover)
	check(plain, "grace", plain.PayloadHash, approval.InChat, "")
	check(plain, "sam", plain.PayloadHash, approval.InChat, approval.RefusedSelfApproval)
	check(plain, "grace", "sha256:2", approval.InChat, approval.RefusedHashMismatch)
	if _, err := svc.Eligibility(bg, "op_"+"aaaaaaaaaaaaaaaaaaaaaaaaaa", "grace", plain.PayloadHash, approval.OnPage); approval.ErrorCode(err) != approval.CodeNotFound {
		t.Errorf("unknown operation: %v", err)
	}

	// The rule and the decide script agree.
	decide := func(who, hash string) approval.DecideOutcome {
		t.Helper()
		_, res, err := svc.DecideAs(bg, plain.Key, who, "slack", hash, true, "")
		if err != nil {
			t.Fatalf("%s decides: %v", who, err)
		}
		return res.Outcome
	}
	if got := decide("grace", "sha256:2"); got != approval.DecideHashMismatch {
		t.Errorf("another payload: %s", got)
	}
	if got := decide("grace", plain.PayloadHash); got != approval.DecideRecorded {
		t.Fatalf("grace: %s", got)
	}
	check(plain, "grace", plain.PayloadHash, approval.InChat, approval.RefusedDecided)
	if got := decide("grace", plain.PayloadHash); got != approval.DecideAlreadyDecided {
		t.Errorf("grace again: %s", got)
	}
	if _, res, err := svc.DecideAs(bg, plain.Key, "grace", "slack", plain.PayloadHash, false, "no"); err != nil || res.Outcome != approval.DecideAlreadyDecided {
		t.Errorf("grace rejects after approving: %v %v", res.Outcome, err)
	}
	if _, _, err := svc.DecideAs(bg, plain.Key, "sam", "slack", plain.PayloadHash, true, ""); approval.RefusalOf(err) != approval.RefusedSelfApproval {
		t.Errorf("sam decides: %v", err)
	}
	clk.Add(25 * time.Hour)
	check(plain, "ada", plain.PayloadHash, approval.InChat, approval.RefusedExpired)
	// The script says expired when it records the expiry, and not_pending
	// (status expired) once it is recorded (reading it here recorded it).
	if _, res, err := svc.DecideAs(bg, plain.Key, "ada", "slack", plain.PayloadHash, true, ""); err != nil ||
		res.Outcome != approval.DecideExpired && !(res.Outcome == approval.DecideNotPending && res.Status == approval.StatusExpired) {
		t.Errorf("ada after the window: %+v %v", res, err)
	}
	check(plain, "ada", plain.PayloadHash, approval.InChat, approval.RefusedExpired)
	check(plain, "grace", plain.PayloadHash, approval.InChat, approval.RefusedDecided)
}
