package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Emails are compared as ASCII with ASCII case ignored, never by Unicode
// case folding: a verified address that only folds to an operator's or
// an approver's opens nothing.
func TestSignInComparesEmailsAsASCII(t *testing.T) {
	e := newSigninEnv(t)
	for _, tc := range []struct{ name, email string }{
		{"long s for an approver's s", "\u017fam@example.com"},        // ſam → sam
		{"Kelvin sign for an operator's k", "\u212adesk@example.com"}, // Kdesk → kdesk
		{"non-breaking space around an address", "sam@example.com\u00a0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPerson()
			r := e.signIn(p, map[string]any{"sub": "u-x", "email": tc.email, "email_verified": true}, "")
			if r.status != 403 || p.cookie("__Host-countersign-session") != nil {
				t.Fatalf("signed in as %q: %d", tc.email, r.status)
			}
			for _, path := range []string{"/inbox", "/console"} {
				if r := p.do(t, "GET", e.base+path, nil, nil); r.status == 200 {
					t.Fatalf("%s opened", path)
				}
			}
		})
	}
	// ASCII case still does not matter.
	p := newPerson()
	if r := e.signIn(p, map[string]any{"sub": "u-k", "email": "KDesk@Example.COM", "email_verified": true}, ""); r.status != http.StatusSeeOther ||
		r.header.Get("Location") != "/console" {
		t.Fatalf("ASCII case: %d %s", r.status, r.header.Get("Location"))
	}
}

// Whatever the provider's unverified address claims say, no session.
func TestSignInRefusesUnverifiedEmails(t *testing.T) {
	e := newSigninEnv(t)
	for name, verified := range map[string]any{"absent": nil, "string false": "false", "string true": "true"} {
		t.Run(name, func(t *testing.T) {
			claims := map[string]any{"sub": "u-g", "email": "grace@example.com"}
			if verified != nil {
				claims["email_verified"] = verified
			}
			p := newPerson()
			if r := e.signIn(p, claims, ""); r.status != 403 || p.cookie("__Host-countersign-session") != nil {
				t.Fatalf("%d", r.status)
			}
		})
	}
}

// The provider's error parameters are not the service's words: the page
// shows a fixed sentence, a standard OAuth error code (quoted as a code)
// and never error_description or an unknown code's text.
func TestSignInCallbackFencesTheProvidersError(t *testing.T) {
	e := newSigninEnv(t)
	lure := "Your account is locked. Call +1 555 0100 and read out your code"
	for _, tc := range []struct {
		name, query, want string
	}{
		{"description", "error=access_denied&error_description=" + url.QueryEscape(lure), "access_denied"},
		{"free text as the code", "error=" + url.QueryEscape(lure), "not a standard OAuth error code"},
		{"markup", "error=" + url.QueryEscape("<b>countersign says</b>"), "not a standard OAuth error code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPerson()
			r := p.do(t, "GET", e.base+"/signin/callback?"+tc.query, nil, nil)
			body := r.body
			if r.status != 403 || !strings.Contains(body, tc.want) || !strings.Contains(body, "Nothing was signed in") {
				t.Fatalf("%d\n%s", r.status, body)
			}
			for _, bad := range []string{"Your account is locked", "555 0100", "countersign says"} {
				if strings.Contains(body, bad) {
					t.Fatalf("the page shows the provider's text %q:\n%s", bad, body)
				}
			}
		})
	}
}

// The inbox shows an operation only to its approvers: the human the agent
// works for and an operator who is no approver get a page that holds
// nothing of it, by GET or by POST.
func TestInboxShowsNoContentToNonApprovers(t *testing.T) {
	e := newSigninEnv(t)
	op := e.pending("calendar", "Quarterly layoffs list")
	grace := newPerson()
	e.signIn(grace, graceClaims, "")
	if r := grace.do(t, "GET", e.base+"/inbox/"+op.Key, nil, nil); r.status != 200 || !strings.Contains(r.body, "layoffs") {
		t.Fatalf("its approver does not see it: %d", r.status)
	}
	for name, claims := range map[string]map[string]any{"sam (on behalf of)": samClaims, "oncall (operator)": oncallClaims} {
		t.Run(name, func(t *testing.T) {
			p := newPerson()
			e.signIn(p, claims, "")
			for _, r := range []response{
				p.do(t, "GET", e.base+"/inbox/"+op.Key, nil, nil),
				p.do(t, "POST", e.base+"/inbox/"+op.Key, url.Values{"decision": {"approve"}, "payload_hash": {op.PayloadHash}}, nil),
			} {
				if r.status == 200 || strings.Contains(r.body, "layoffs") || strings.Contains(r.body, approvalShort(op.PayloadHash)) {
					t.Fatalf("%d, the page shows the operation:\n%s", r.status, r.body)
				}
			}
		})
	}
}

func approvalShort(h string) string {
	if len(h) > 19 {
		return h[7:19]
	}
	return h
}
