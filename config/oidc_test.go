package config

import (
	"strings"
	"testing"
)

const oidcBase = `
principals:
  - {id: agent, api_key_sha256: "0000000000000000000000000000000000000000000000000000000000000001", scopes: [email.send]}
operators:
  - {id: oncall, api_key_sha256: "0000000000000000000000000000000000000000000000000000000000000002", email: oncall@example.com}
approvers:
  - {id: grace, email: grace@example.com, oidc_subject: "u-1"}
  - {id: ada, email: ada@example.com}
routes:
  - match: {action: email.send}
    approvers: {ids: [grace, ada]}
    notify: [email]
    step_up: passkey
`

func TestOIDCBlock(t *testing.T) {
	f, err := Parse([]byte(oidcBase + `
oidc:
  issuer: https://login.example.com
  client_id: countersign
  client_secret: ${OIDC_SECRET}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := f.Policy()
	if p.SignInClaim != "email" || f.OIDC.Session() != DefaultSessionTTL {
		t.Errorf("claim %q, session %s", p.SignInClaim, f.OIDC.Session())
	}
	if got := p.Identify("GRACE@example.com"); got.Approver == nil || got.Approver.ID != "grace" || got.Operator != nil {
		t.Errorf("Identify(grace) = %+v", got)
	}
	if got := p.Identify("oncall@example.com"); got.Operator == nil || got.Operator.ID != "oncall" || got.Approver != nil {
		t.Errorf("Identify(oncall) = %+v", got)
	}
	if got := p.Identify("u-1"); got.Approver != nil {
		t.Errorf("a subject matched by email: %+v", got)
	}
	r, err := p.Resolve("email.send", p.Principals[0], nil)
	if err != nil || r.StepUp != "passkey" {
		t.Errorf("route = %+v, %v", r, err)
	}
}

func TestOIDCSubjectClaim(t *testing.T) {
	f, err := Parse([]byte(oidcBase + `
oidc: {issuer: "http://127.0.0.1:9999", client_id: c, client_secret: "${S}", claim: sub}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Policy().Identify("u-1"); got.Approver == nil || got.Approver.ID != "grace" {
		t.Errorf("Identify(u-1) = %+v", got)
	}
	if got := f.Policy().Identify("grace@example.com"); got.Approver != nil {
		t.Errorf("an email matched by sub: %+v", got)
	}
}

func TestOIDCRefusals(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"literal secret":   {`oidc: {issuer: "https://i.example", client_id: c, client_secret: hunter2}`, "client_secret must be a ${ENV_VAR}"},
		"plain http":       {`oidc: {issuer: "http://i.example", client_id: c, client_secret: "${S}"}`, "must be https"},
		"no client":        {`oidc: {issuer: "https://i.example", client_secret: "${S}"}`, "client_id is required"},
		"short session":    {`oidc: {issuer: "https://i.example", client_id: c, client_secret: "${S}", session_ttl: 1m}`, "session_ttl"},
		"bad claim":        {`oidc: {issuer: "https://i.example", client_id: c, client_secret: "${S}", claim: "a b"}`, "not a claim name"},
		"unknown field":    {`oidc: {issuer: "https://i.example", client_id: c, client_secret: "${S}", secret: x}`, "field secret not found"},
		"bad step_up":      {"", "step_up"},
		"subject, no oidc": {"", "oidc_subject needs an oidc: block"},
	} {
		t.Run(name, func(t *testing.T) {
			y := oidcBase + tc.yaml
			if name == "bad step_up" {
				y = strings.Replace(oidcBase, "step_up: passkey", "step_up: sms", 1) + `oidc: {issuer: "https://i.example", client_id: c, client_secret: "${S}"}`
			}
			_, err := Parse([]byte(y))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	dup := strings.Replace(oidcBase, "ada@example.com", "Grace@example.com", 1) + `oidc: {issuer: "https://i.example", client_id: c, client_secret: "${S}"}`
	if _, err := Parse([]byte(dup)); err == nil || !strings.Contains(err.Error(), "both named") {
		t.Errorf("duplicate email: %v", err)
	}
}
