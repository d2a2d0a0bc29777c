package approval

// People sign in to the approver inbox and the operator console through
// an OpenID Connect provider (policy file oidc:). The ID token's claim
// named by Policy.SignInClaim names the person: "email" is matched
// against approvers' and operators' email addresses (see SameEmail: ASCII
// only, ASCII case ignored, no Unicode case folding), any other claim
// against their oidc_subject, exactly. A sign-in is never a
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
	// Exactly as the token says: no trimming, no folding.
	if value == "" || p.SignInClaim == "" {
		return out
	}
	email := p.SignInClaim == ClaimEmail
	same := func(addr, subject string) bool {
		if email {
			return SameEmail(addr, value)
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

// SameEmail says whether two addresses name one mailbox at sign-in: both
// pure ASCII, equal once ASCII letters are lowercased. Unicode case
// folding is never applied (strings.EqualFold would take "ſ" for "s" and
// the Kelvin sign for "k", so that a verified address the provider
// treats as someone else's would open an operator's console), and an
// address with any non-ASCII character (an internationalized local part
// or domain, in any form) matches nothing: configure such a person by
// oidc_subject.
func SameEmail(a, b string) bool {
	na, ok := NormalEmail(a)
	if !ok {
		return false
	}
	nb, ok := NormalEmail(b)
	return ok && na == nb
}

// NormalEmail is addr with ASCII letters lowercased, and false when it is
// empty or holds anything but printable ASCII.
func NormalEmail(addr string) (string, bool) {
	if addr == "" {
		return "", false
	}
	b := []byte(addr)
	for i, c := range b {
		switch {
		case c < 0x21 || c > 0x7e:
			return "", false
		case 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b), true
}
