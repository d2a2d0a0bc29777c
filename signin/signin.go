// Package signin is the OpenID Connect relying party of the approver inbox
// and the operator console (coreos/go-oidc, golang.org/x/oauth2): the
// authorization code flow with PKCE (S256), a state bound to the browser
// and a nonce bound to the ID token. It finds the provider lazily (a
// provider that is down at start-up delays sign-in, not the service) and
// returns the value of the one claim that names the person; mapping it to
// approvers and operators is approval.Policy.Identify.
package signin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Config describes the provider and this client.
type Config struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is COUNTERSIGN_PUBLIC_URL + /signin/callback.
	RedirectURL string
	// Scopes besides openid (default email, profile).
	Scopes []string
	// Claim names the person ("email", "sub", …).
	Claim string
	// HTTPClient reaches the provider (default: 10 s timeout).
	HTTPClient *http.Client
	// Now is the clock of ID token expiry checks.
	Now func() time.Time
}

// Client signs people in through one provider.
type Client struct {
	cfg Config

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
	failedAt time.Time
	lastErr  error
}

// New checks cfg. It does not reach the provider yet.
func New(cfg Config) (*Client, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, errors.New("signin: issuer, client id and redirect URL are required")
	}
	if cfg.Claim == "" {
		cfg.Claim = "email"
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{"email", "profile"}
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cfg: cfg}, nil
}

// Error is a sign-in that did not work, said plainly; it holds no token.
type Error struct{ Reason string }

func (e *Error) Error() string { return "sign-in: " + e.Reason }

// retryAfter is how long a failed discovery is remembered before the
// provider is asked again.
const retryAfter = 10 * time.Second

// ready finds the provider (discovery document and keys) once.
func (c *Client) ready(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.oauth != nil {
		return c.oauth, c.verifier, nil
	}
	if c.lastErr != nil && c.cfg.Now().Sub(c.failedAt) < retryAfter {
		return nil, nil, c.lastErr
	}
	// The provider keeps this context to fetch keys later: it must
	// outlive the request that happened to find it.
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), c.cfg.HTTPClient)
	dctx, cancel := context.WithTimeout(pctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, c.cfg.Issuer)
	if err != nil {
		c.failedAt, c.lastErr = c.cfg.Now(), fmt.Errorf("signin: the provider at %s cannot be reached or is misconfigured: %w", c.cfg.Issuer, err)
		return nil, nil, c.lastErr
	}
	// The key set fetches keys later, with this long-lived context's client.
	c.verifier = p.VerifierContext(pctx, &oidc.Config{ClientID: c.cfg.ClientID, Now: c.cfg.Now})
	ep := p.Endpoint()
	if ep.AuthStyle == oauth2.AuthStyleAutoDetect {
		// client_secret_basic, the OIDC default: one attempt per code.
		ep.AuthStyle = oauth2.AuthStyleInHeader
	}
	c.oauth = &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, RedirectURL: c.cfg.RedirectURL,
		Endpoint: ep, Scopes: append([]string{oidc.ScopeOpenID}, c.cfg.Scopes...)}
	c.lastErr = nil
	return c.oauth, c.verifier, nil
}

// State is what a sign-in must keep until the callback: the state bound
// to the browser, the nonce bound to the ID token, the PKCE verifier.
// All three are secrets of this sign-in; never log them.
type State struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	// Next is where to go once signed in (a local path).
	Next string `json:"x,omitempty"`
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Start begins a sign-in: the provider URL to send the browser to, and the
// state to keep.
func (c *Client) Start(ctx context.Context, next string) (string, State, error) {
	oc, _, err := c.ready(ctx)
	if err != nil {
		return "", State{}, err
	}
	st := State{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(), Next: next}
	u := oc.AuthCodeURL(st.State, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier))
	return u, st, nil
}

// Identity is who signed in: the value of the configured claim, and the
// token's subject and issuer for the log.
type Identity struct {
	Value   string
	Subject string
	Name    string
}

// Finish redeems the authorization code with the PKCE verifier, verifies
// the ID token (signature, issuer, audience, expiry, nonce) and returns
// the person's identity. Returns *Error for a sign-in that did not work.
func (c *Client) Finish(ctx context.Context, code string, st State) (Identity, error) {
	oc, verifier, err := c.ready(ctx)
	if err != nil {
		return Identity{}, err
	}
	if code == "" || len(code) > 2048 {
		return Identity{}, &Error{Reason: "the provider sent no authorization code"}
	}
	xctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, c.cfg.HTTPClient), 10*time.Second)
	defer cancel()
	tok, err := oc.Exchange(xctx, code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return Identity{}, &Error{Reason: "the provider refused the authorization code (" + re.ErrorCode + ")"}
		}
		return Identity{}, fmt.Errorf("signin: token endpoint: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, &Error{Reason: "the provider returned no ID token"}
	}
	idt, err := verifier.Verify(xctx, raw)
	if err != nil {
		return Identity{}, &Error{Reason: "the ID token did not verify: " + err.Error()}
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		return Identity{}, &Error{Reason: "the ID token was issued for another sign-in (nonce)"}
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, &Error{Reason: "the ID token's claims are unreadable"}
	}
	// A token for several clients must be the one issued to us (OIDC
	// Core 3.1.3.7, items 4 and 5): its azp names our client id. An azp
	// naming another client is refused whatever aud says.
	azp, hasAZP := claims["azp"]
	if len(idt.Audience) > 1 && !hasAZP {
		return Identity{}, &Error{Reason: "the ID token names several audiences and no authorized party (azp)"}
	}
	if hasAZP && azp != c.cfg.ClientID {
		return Identity{}, &Error{Reason: "the ID token was issued to another client (azp)"}
	}
	v, _ := claims[c.cfg.Claim].(string)
	if c.cfg.Claim == "sub" {
		v = idt.Subject
	}
	if strings.TrimSpace(v) == "" {
		return Identity{}, &Error{Reason: "the ID token has no " + c.cfg.Claim + " claim"}
	}
	// An email names a person only when the provider vouches for it:
	// email_verified must be the JSON boolean true. Absent, false, the
	// string "true" or "false", 1: refused (a provider that does not
	// verify addresses is configured with a subject claim instead).
	if c.cfg.Claim == "email" {
		if ev, ok := claims["email_verified"].(bool); !ok || !ev {
			return Identity{}, &Error{Reason: "the provider does not say this email address is verified (email_verified is not true)"}
		}
	}
	name, _ := claims["name"].(string)
	return Identity{Value: v, Subject: idt.Subject, Name: name}, nil
}
