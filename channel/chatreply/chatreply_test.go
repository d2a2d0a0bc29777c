package chatreply_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/chatreply"
)

// What a click the domain's rule refuses is told, in every chat channel.
func TestExplainRefusals(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := chatreply.Replies{Date: func(t time.Time) string { return t.Format("15:04") }, Escape: strings.ToUpper}
	grace, sam, eve := &approval.Approver{ID: "grace"}, &approval.Approver{ID: "sam"}, &approval.Approver{ID: "eve"}
	pending := func() *approval.Operation {
		return &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Status: approval.StatusPending, PayloadHash: "sha256:1",
			OnBehalfOf: "sam", ExpiresAt: now.Add(time.Hour),
			Route: approval.Route{Approvers: []string{"grace", "ada"}, Required: 1, ForbidSelfApproval: true}}
	}
	decided := pending()
	decided.Approvals = []approval.Decision{{Approver: "grace", Via: "email", At: now.Add(-time.Minute)}}
	rejected := pending()
	rejected.Status = approval.StatusRejected
	rejected.Rejection = &approval.Decision{Approver: "grace", Via: "teams", At: now.Add(-2 * time.Minute)}
	expired := pending()
	expired.ExpiresAt = now.Add(-time.Minute)
	done := pending()
	done.Status = approval.StatusSucceeded

	for _, tc := range []struct {
		name string
		op   *approval.Operation
		a    *approval.Approver
		hash string
		want string
	}{
		{"may decide", pending(), grace, "sha256:1", ""},
		{"on behalf of", pending(), sam, "sha256:1", "You cannot approve an operation an agent prepared on your behalf. Nothing was recorded."},
		{"not on the route", pending(), eve, "sha256:1", "You are not an approver of this operation. Nothing was recorded."},
		{"decided", decided, grace, "sha256:1", "You already approved this operation (via EMAIL, 09:59); a decision cannot be changed."},
		{"rejected", rejected, grace, "sha256:1", "You already rejected this operation (via TEAMS, 09:58)"},
		{"expired", expired, grace, "sha256:1", "The approval window ended 09:59, so the operation expired"},
		{"finished", done, grace, "sha256:1", "no longer waiting for decisions: it is succeeded"},
		{"hash", pending(), grace, "sha256:2", "its payload hash differs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := approval.MayDecide(tc.op, tc.a.ID, tc.hash, now)
			if (err == nil) != (tc.want == "") {
				t.Fatalf("MayDecide: %v, want a refusal: %v", err, tc.want != "")
			}
			got := r.Explain(tc.op, approval.DecideResult{}, err, tc.a)
			if err == nil {
				return
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	// A step-up refusal is shown as the domain words it.
	su := &approval.Refusal{Code: approval.RefusedStepUp, Reason: "this operation needs your passkey: open its approval page"}
	if got := r.Explain(pending(), approval.DecideResult{}, su, grace); got != "This operation needs your passkey: open its approval page. Nothing was recorded." {
		t.Errorf("step-up: %q", got)
	}
	if got := r.Explain(nil, approval.DecideResult{}, approval.Errorf(approval.CodeNotFound, "gone"), grace); !strings.Contains(got, "no longer exists") {
		t.Errorf("not found: %q", got)
	}
	if got := r.Explain(nil, approval.DecideResult{}, errors.New("redis: connection refused"), grace); got != chatreply.Unavailable {
		t.Errorf("store down: %q", got)
	}
	for _, o := range []approval.DecideOutcome{approval.DecideRecorded, approval.DecideApproved, approval.DecideRejected} {
		if got := r.Explain(pending(), approval.DecideResult{Outcome: o}, nil, grace); got != "" {
			t.Errorf("%s: %q", o, got)
		}
	}
}
