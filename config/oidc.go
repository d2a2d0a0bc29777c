package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

// OIDCSpec is the policy file's oidc: block: people sign in to the
// approver inbox (/inbox) and the operator console (/console) through
// this OpenID Connect provider (authorization code flow with PKCE).
//
//	oidc:
//	  issuer: https://login.example.com
//	  client_id: countersign
//	  client_secret: ${COUNTERSIGN_OIDC_SECRET}
//	  claim: email          # or sub, or another claim matched against oidc_subject
//
// The redirect URI to register at the provider is
// COUNTERSIGN_PUBLIC_URL + /signin/callback.
type OIDCSpec struct {
	Issuer   string `yaml:"issuer"`
	ClientID string `yaml:"client_id"`
	// ClientSecret is a ${ENV_VAR} reference, never a literal.
	ClientSecret string `yaml:"client_secret"`
	// Claim names the ID token claim that identifies a person: "email"
	// (the default) is matched against approvers' and operators' email,
	// any other against their oidc_subject.
	Claim string `yaml:"claim"`
	// Scopes requested besides openid (default: email, profile).
	Scopes []string `yaml:"scopes"`
	// SessionTTL is how long a sign-in lasts (default 30m, 5m to 12h).
	SessionTTL Duration `yaml:"session_ttl"`
}

// DefaultSessionTTL is how long a sign-in lasts unless the file says.
const DefaultSessionTTL = 30 * time.Minute

var claimPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_:.-]{0,63}$`)

// ClaimName is the claim, with its default.
func (o *OIDCSpec) ClaimName() string {
	if o.Claim == "" {
		return approval.ClaimEmail
	}
	return o.Claim
}

// Session is the session lifetime, with its default.
func (o *OIDCSpec) Session() time.Duration {
	if o.SessionTTL == 0 {
		return DefaultSessionTTL
	}
	return time.Duration(o.SessionTTL)
}

// validateOIDC checks the oidc: block, and that the people it can sign in
// are named unambiguously.
func (f *File) validateOIDC(bad func(string, ...any)) {
	o := f.OIDC
	if o == nil {
		for _, a := range f.Approvers {
			if a.OIDCSubject != "" {
				bad("approvers %s: oidc_subject needs an oidc: block", a.ID)
			}
		}
		return
	}
	u, err := url.Parse(o.Issuer)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		bad("oidc: issuer %q must be an absolute https URL", o.Issuer)
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		bad("oidc: issuer %q must be https (plain http only on a loopback address, for tests)", o.Issuer)
	}
	if strings.TrimSpace(o.ClientID) == "" {
		bad("oidc: client_id is required")
	}
	if !envRef.MatchString(o.ClientSecret) {
		bad("oidc: client_secret must be a ${ENV_VAR} reference, never a literal")
	}
	if !claimPattern.MatchString(o.ClaimName()) {
		bad("oidc: claim %q is not a claim name", o.Claim)
	}
	for _, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n") {
			bad("oidc: scope %q is not a scope", s)
		}
	}
	if d := time.Duration(o.SessionTTL); d != 0 && (d < 5*time.Minute || d > 12*time.Hour) {
		bad("oidc: session_ttl %s must be between 5m and 12h", d)
	}
	email := o.ClaimName() == approval.ClaimEmail
	names := map[string]string{}
	unique := func(kind, id, value string) {
		if value == "" {
			return
		}
		if n, ok := approval.NormalEmail(value); ok && email {
			value = n // the form sign-in compares
		}
		k := kind + "\x00" + value
		if other, dup := names[k]; dup {
			bad("oidc: %s %s and %s are both named %q at sign-in; each person needs their own", kind, other, id, value)
		}
		names[k] = id
	}
	for _, a := range f.Approvers {
		if email {
			unique("approvers", a.ID, a.Email)
		} else {
			unique("approvers", a.ID, a.OIDCSubject)
		}
	}
	for _, op := range f.Operators {
		if op.Email != "" && !strings.Contains(op.Email, "@") {
			bad("operators %s: email %q is not an address", op.ID, op.Email)
		}
		if email {
			unique("operators", op.ID, op.Email)
		} else {
			unique("operators", op.ID, op.OIDCSubject)
		}
	}
}

func loopbackHost(h string) bool {
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}

// ResolveSecret expands the client secret from the environment.
func (o *OIDCSpec) ResolveSecret(lookup func(string) (string, bool)) (string, error) {
	v, err := Expand(o.ClientSecret, lookup)
	if err != nil {
		return "", fmt.Errorf("oidc: client_secret: %w", err)
	}
	return v, nil
}
