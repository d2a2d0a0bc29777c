package main

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/passkey"
	"github.com/countersign/countersign/signin"
	"github.com/countersign/countersign/web"
)

// people are the pieces that serve people rather than agents: OIDC
// sign-in to the inbox and console, and the passkey relying party.
type people struct {
	signIn     web.SignIn
	sessionTTL time.Duration
	passkeys   approval.Passkeys
}

// peopleFor builds sign-in from the policy file's oidc: block and the
// passkey relying party of the public URL. A route with step_up: passkey
// needs the relying party, so a public URL that cannot carry passkeys (an
// IP address, plain http off localhost) stops the start.
func (m *Main) peopleFor(file *config.File, publicURL string) (people, error) {
	var p people
	stepUp := false
	for _, r := range file.Routes {
		stepUp = stepUp || r.StepUp == approval.StepUpPasskey
	}
	u, _ := url.Parse(publicURL)
	rp, err := passkey.New(publicURL)
	if err == nil && stepUp && rp.Origin() != u.Scheme+"://"+u.Host {
		err = fmt.Errorf("approval links on %s cannot ask for passkeys (WebAuthn needs a domain name)", publicURL)
	}
	switch {
	case err == nil:
		p.passkeys = rp
	case stepUp:
		return p, fmt.Errorf("a route has step_up: passkey, but %v; set COUNTERSIGN_PUBLIC_URL to the https address people open", err)
	}
	if file.OIDC == nil {
		return p, nil
	}
	if u.Scheme != "https" && !loopback(u.Hostname()) {
		return p, fmt.Errorf("oidc: sign-in needs an https COUNTERSIGN_PUBLIC_URL (session cookies are Secure), not %s", u.Scheme+"://"+u.Host)
	}
	secret, err := file.OIDC.ResolveSecret(m.Env)
	if err != nil {
		return p, err
	}
	c, err := signin.New(signin.Config{Issuer: file.OIDC.Issuer, ClientID: file.OIDC.ClientID, ClientSecret: secret,
		RedirectURL: strings.TrimRight(publicURL, "/") + "/signin/callback", Scopes: file.OIDC.Scopes, Claim: file.OIDC.ClaimName(), Now: m.Now})
	if err != nil {
		return p, err
	}
	p.signIn, p.sessionTTL = c, file.OIDC.Session()
	return p, nil
}
