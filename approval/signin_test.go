package approval_test

import (
	"testing"

	"github.com/countersign/countersign/approval"
)

// Sign-in names approvers and operators by email as ASCII, ASCII case
// ignored, and by subject exactly; nothing else matches.
func TestIdentifyMatchesExactly(t *testing.T) {
	p := &approval.Policy{SignInClaim: approval.ClaimEmail,
		Approvers: []*approval.Approver{{ID: "sam", Email: "sam@example.com"}, {ID: "ines", Email: "inés@example.com"}},
		Operators: []*approval.Operator{{ID: "kdesk", Email: "Kdesk@Example.com"}}}
	for _, tc := range []struct {
		value, approver, operator string
	}{
		{"sam@example.com", "sam", ""},
		{"SAM@EXAMPLE.COM", "sam", ""},
		{"kdesk@example.com", "", "kdesk"},
		{"\u017fam@example.com", "", ""},   // long s
		{"\u212adesk@example.com", "", ""}, // Kelvin sign
		{"sam@example.com\u00a0", "", ""},  // no-break space
		{" sam@example.com", "", ""},       // not trimmed
		{"inés@example.com", "", ""},       // non-ASCII never matches, not even itself
		{"INÉS@example.com", "", ""},
		{"", "", ""},
	} {
		got := p.Identify(tc.value)
		a, o := "", ""
		if got.Approver != nil {
			a = got.Approver.ID
		}
		if got.Operator != nil {
			o = got.Operator.ID
		}
		if a != tc.approver || o != tc.operator {
			t.Errorf("Identify(%q) = approver %q, operator %q; want %q, %q", tc.value, a, o, tc.approver, tc.operator)
		}
	}
	bySub := &approval.Policy{SignInClaim: "sub", Approvers: []*approval.Approver{{ID: "sam", OIDCSubject: "00uAbC"}}}
	for v, want := range map[string]bool{"00uAbC": true, "00uabc": false, "00uAbC ": false} {
		if got := bySub.Identify(v).Approver != nil; got != want {
			t.Errorf("by subject, Identify(%q) = %v", v, got)
		}
	}
}
