package approval

import "strings"

// People sign in to the approver inbox and the operator console through
// an OpenID Connect provider (policy file oidc:). The ID token's claim
// named by Policy.SignInClaim names the person: "email" is matched
// against approvers' and operators' email addresses (case-insensitively),
// any other claim against their oidc_subject. A sign-in is never a
// capability an agent can reach: it is a browser session, and the inbox
// decides through DecideAs like any channel that authenticated the human
// itself.

// ClaimEmail is the default sign-in claim.
const ClaimEmail = "email"

// SignedIn is who a sign-in names: an approver, an operator, both or
// neither (then the session opens nothing).
type SignedIn struct {
	Approver *Approver
	Operator *Operator
}

// Identify maps the value of the sign-in claim to the people it names.
func (p *Policy) Identify(value string) SignedIn {
	var out SignedIn
	value = strings.TrimSpace(value)
	if value == "" || p.SignInClaim == "" {
		return out
	}
	email := p.SignInClaim == ClaimEmail
	same := func(addr, subject string) bool {
		if email {
			return addr != "" && strings.EqualFold(addr, value)
		}
		return subject != "" && subject == value
	}
	for _, a := range p.Approvers {
		if same(a.Email, a.OIDCSubject) {
			out.Approver = a
			break
		}
	}
	for _, o := range p.Operators {
		if same(o.Email, o.OIDCSubject) {
			out.Operator = o
			break
		}
	}
	return out
}

// Operator finds an operator by id.
func (p *Policy) Operator(id string) *Operator {
	for _, o := range p.Operators {
		if o.ID == id {
			return o
		}
	}
	return nil
}
