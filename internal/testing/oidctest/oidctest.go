// Package oidctest is a small OpenID Connect provider for tests, running
// in-process on 127.0.0.1: a discovery document, a JWKS, an authorization
// endpoint that signs in whoever the test says (no login form: it
// redirects straight back with a code), and a token endpoint that checks
// the client secret, the redirect URI and the PKCE verifier (S256) before
// it returns a real RS256 ID token (go-jose) carrying the nonce.
//
//	p := oidctest.Start(t, "countersign", "client-secret")
//	p.SignIn(map[string]any{"sub": "u-1", "email": "grace@example.com", "email_verified": true})
//	// point the relying party at p.Issuer()
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Provider is one running provider with one registered client.
type Provider struct {
	srv          *httptest.Server
	key          *rsa.PrivateKey
	signer       jose.Signer
	clientID     string
	clientSecret string

	mu     sync.Mutex
	claims map[string]any
	codes  map[string]grant
	// Redirects lists the redirect URIs the client may use; empty: any.
	redirects []string
	// Tokens counts successful token exchanges.
	tokens int
	// Refused counts token requests refused (bad verifier, secret, code).
	refused int
	// NonceOverride, when set, replaces the nonce in ID tokens (tests of
	// a token issued for another sign-in).
	nonceOverride string
}

type grant struct {
	clientID, redirect, challenge, nonce string
	claims                               map[string]any
	expires                              time.Time
}

// Start runs a provider for t; it stops when t ends.
func Start(t testing.TB, clientID, clientSecret string) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "test-key-1"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{key: key, signer: signer, clientID: clientID, clientSecret: clientSecret, codes: map[string]grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.srv.URL }

// SignIn sets the claims of whoever signs in next.
func (p *Provider) SignIn(claims map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.claims = claims
}

// AllowRedirects registers the client's redirect URIs.
func (p *Provider) AllowRedirects(uris ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.redirects = uris
}

// OverrideNonce makes ID tokens carry nonce instead of the one asked for.
func (p *Provider) OverrideNonce(nonce string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nonceOverride = nonce
}

// Counts returns the token exchanges done and refused.
func (p *Provider) Counts() (tokens, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tokens, p.refused
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{
		"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/authorize", "token_endpoint": p.srv.URL + "/token",
		"jwks_uri": p.srv.URL + "/jwks", "response_types_supported": []string{"code"},
		"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: "test-key-1", Algorithm: "RS256", Use: "sig"}}}
	writeJSON(w, 200, set)
}

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect := q.Get("redirect_uri")
	p.mu.Lock()
	allowed := len(p.redirects) == 0
	for _, u := range p.redirects {
		allowed = allowed || u == redirect
	}
	claims := p.claims
	p.mu.Unlock()
	switch {
	case q.Get("client_id") != p.clientID:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	case !allowed:
		http.Error(w, "redirect_uri is not registered", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "code flow with PKCE S256 required", http.StatusBadRequest)
		return
	case claims == nil:
		http.Error(w, "nobody to sign in", http.StatusForbidden)
		return
	}
	code := random()
	p.mu.Lock()
	p.codes[code] = grant{clientID: p.clientID, redirect: redirect, challenge: q.Get("code_challenge"), nonce: q.Get("nonce"),
		claims: claims, expires: time.Now().Add(time.Minute)}
	p.mu.Unlock()
	u, _ := url.Parse(redirect)
	rq := u.Query()
	rq.Set("code", code)
	rq.Set("state", q.Get("state"))
	u.RawQuery = rq.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", 400)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fail := func(code string) {
		p.refused++
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": code})
	}
	if id != p.clientID || subtle.ConstantTimeCompare([]byte(secret), []byte(p.clientSecret)) != 1 {
		fail("invalid_client")
		return
	}
	g, ok := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code")) // one use, whatever happens
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case r.PostForm.Get("grant_type") != "authorization_code" || !ok || time.Now().After(g.expires):
		fail("invalid_grant")
		return
	case g.redirect != r.PostForm.Get("redirect_uri"):
		fail("invalid_grant")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		fail("invalid_grant") // PKCE
		return
	}
	now := time.Now()
	claims := map[string]any{"iss": p.srv.URL, "aud": p.clientID, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "nonce": g.nonce}
	if p.nonceOverride != "" {
		claims["nonce"] = p.nonceOverride
	}
	for k, v := range g.claims {
		claims[k] = v
	}
	body, _ := json.Marshal(claims)
	jws, err := p.signer.Sign(body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	idt, _ := jws.CompactSerialize()
	p.tokens++
	writeJSON(w, 200, map[string]any{"access_token": random(), "token_type": "Bearer", "expires_in": 300, "id_token": idt})
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
