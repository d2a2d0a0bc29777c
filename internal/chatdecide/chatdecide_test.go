package chatdecide_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/chatdecide"
)

// The rules every chat channel applies, and what a refused click is told.
func TestPrecheckAndExplain(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := chatdecide.Rules{Date: func(t time.Time) string { return t.Format("15:04") }, Escape: strings.ToUpper}
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
			got := r.Precheck(tc.op, nil, tc.a, tc.hash, now)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	if got := r.Explain(nil, approval.DecideResult{}, approval.Errorf(approval.CodeNotFound, "gone"), grace); !strings.Contains(got, "no longer exists") {
		t.Errorf("not found: %q", got)
	}
	if got := r.Explain(nil, approval.DecideResult{}, errors.New("redis: connection refused"), grace); got != chatdecide.Unavailable {
		t.Errorf("store down: %q", got)
	}
	for _, o := range []approval.DecideOutcome{approval.DecideRecorded, approval.DecideApproved, approval.DecideRejected} {
		if got := r.Explain(pending(), approval.DecideResult{Outcome: o}, nil, grace); got != "" {
			t.Errorf("%s: %q", o, got)
		}
	}
}
