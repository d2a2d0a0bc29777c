package main

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// approvers enroll reads as a sentence for the development approver "you"
// and for the console channel: no "sent via console to console", no
// "you has 0 passkey(s)".
func TestEnrolSummaryWording(t *testing.T) {
	exp := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		res  approval.EnrolResult
		want string
	}{
		{approval.EnrolResult{Approver: "you", ExpiresAt: exp, Sent: []approval.Notified{{Channel: "console", To: "console"}}},
			"enrolment link for approver \"you\" printed on the service's console (its standard error)\n" +
				"the link works once, until 2026-12-05 12:00 UTC; approver \"you\" has no passkey yet\n"},
		{approval.EnrolResult{Approver: "grace", ExpiresAt: exp, Passkeys: 1, Sent: []approval.Notified{{Channel: "email", To: "grace@example.com"}}},
			"enrolment link for approver \"grace\" sent by email to grace@example.com\n" +
				"the link works once, until 2026-12-05 12:00 UTC; approver \"grace\" has 1 passkey\n"},
		{approval.EnrolResult{Approver: "grace", ExpiresAt: exp, Passkeys: 2, Sent: []approval.Notified{{Channel: "email", To: "grace@example.com"}}},
			"has 2 passkeys\n"},
	} {
		got := enrolSummary(&tc.res)
		if !strings.HasSuffix(got, tc.want) {
			t.Errorf("got:\n%s\nwant (ending):\n%s", got, tc.want)
		}
		for _, slip := range []string{"passkey(s)", "via console to console", "you has"} {
			if strings.Contains(got, slip) {
				t.Errorf("%q in %q", slip, got)
			}
		}
	}
}
