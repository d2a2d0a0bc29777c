package signin_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/countersign/countersign/internal/testing/oidctest"
	"github.com/countersign/countersign/signin"
)

const redirect = "http://localhost:8080/signin/callback"

func setup(t *testing.T) (*oidctest.Provider, *signin.Client) {
	t.Helper()
	p := oidctest.Start(t, "countersign", "s3cret")
	p.AllowRedirects(redirect)
	c, err := signin.New(signin.Config{Issuer: p.Issuer(), ClientID: "countersign", ClientSecret: "s3cret", RedirectURL: redirect})
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

// authorize follows the provider's authorization URL as a browser would
// and returns the code and state it sends back.
func authorize(t *testing.T, authURL string) (code, state string) {
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d", resp.StatusCode)
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("code"), u.Query().Get("state")
}

func TestSignIn(t *testing.T) {
	p, c := setup(t)
	p.SignIn(map[string]any{"sub": "u-1", "email": "grace@example.com", "email_verified": true, "name": "Grace"})
	u, st, err := c.Start(context.Background(), "/inbox")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.Parse(u)
	if q.Query().Get("code_challenge_method") != "S256" || q.Query().Get("nonce") != st.Nonce || q.Query().Get("state") != st.State {
		t.Fatalf("auth URL lacks PKCE, nonce or state: %s", u)
	}
	code, state := authorize(t, u)
	if state != st.State {
		t.Fatalf("state %q", state)
	}
	id, err := c.Finish(context.Background(), code, st)
	if err != nil {
		t.Fatal(err)
	}
	if id.Value != "grace@example.com" || id.Subject != "u-1" || id.Name != "Grace" {
		t.Errorf("identity = %+v", id)
	}
	// A code is used once.
	if _, err := c.Finish(context.Background(), code, st); err == nil {
		t.Error("a code was redeemed twice")
	}
}

func TestSignInRefusals(t *testing.T) {
	var se *signin.Error
	t.Run("wrong PKCE verifier", func(t *testing.T) {
		p, c := setup(t)
		p.SignIn(map[string]any{"sub": "u-1", "email": "grace@example.com"})
		u, st, _ := c.Start(context.Background(), "")
		code, _ := authorize(t, u)
		st.Verifier = "another-verifier-another-verifier-another-verifier"
		if _, err := c.Finish(context.Background(), code, st); !errors.As(err, &se) {
			t.Fatalf("err = %v", err)
		}
		if _, refused := p.Counts(); refused != 1 {
			t.Errorf("refused = %d", refused)
		}
	})
	t.Run("another sign-in's nonce", func(t *testing.T) {
		p, c := setup(t)
		p.SignIn(map[string]any{"sub": "u-1", "email": "grace@example.com"})
		p.OverrideNonce("someone-elses-nonce")
		u, st, _ := c.Start(context.Background(), "")
		code, _ := authorize(t, u)
		if _, err := c.Finish(context.Background(), code, st); !errors.As(err, &se) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unverified email", func(t *testing.T) {
		p, c := setup(t)
		p.SignIn(map[string]any{"sub": "u-1", "email": "grace@example.com", "email_verified": false})
		u, st, _ := c.Start(context.Background(), "")
		code, _ := authorize(t, u)
		if _, err := c.Finish(context.Background(), code, st); !errors.As(err, &se) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("token for another client", func(t *testing.T) {
		p := oidctest.Start(t, "other-client", "s3cret")
		p.SignIn(map[string]any{"sub": "u-1", "email": "grace@example.com"})
		c, _ := signin.New(signin.Config{Issuer: p.Issuer(), ClientID: "countersign", ClientSecret: "s3cret", RedirectURL: redirect})
		u, _, err := c.Start(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("the provider authorized an unknown client: %d", resp.StatusCode)
		}
	})
	t.Run("provider down", func(t *testing.T) {
		c, _ := signin.New(signin.Config{Issuer: "http://127.0.0.1:1", ClientID: "c", RedirectURL: redirect})
		if _, _, err := c.Start(context.Background(), ""); err == nil {
			t.Error("started a sign-in without a provider")
		}
	})
}

// finish signs in with claims and returns what Finish says.
func finish(t *testing.T, claims map[string]any, cfg func(*signin.Config)) (signin.Identity, error) {
	t.Helper()
	p := oidctest.Start(t, "countersign", "s3cret")
	p.AllowRedirects(redirect)
	sc := signin.Config{Issuer: p.Issuer(), ClientID: "countersign", ClientSecret: "s3cret", RedirectURL: redirect}
	if cfg != nil {
		cfg(&sc)
	}
	c, err := signin.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	p.SignIn(claims)
	u, st, err := c.Start(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	code, _ := authorize(t, u)
	return c.Finish(context.Background(), code, st)
}

// An email names someone only when email_verified is the boolean true.
func TestSignInByEmailNeedsAVerifiedAddress(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verified any // nil: no claim
	}{
		{"no email_verified claim", nil},
		{"the string false", "false"},
		{"the string true", "true"},
		{"a number", 1},
		{"false", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claims := map[string]any{"sub": "u-1", "email": "grace@example.com"}
			if tc.verified != nil {
				claims["email_verified"] = tc.verified
			}
			var se *signin.Error
			if id, err := finish(t, claims, nil); !errors.As(err, &se) {
				t.Fatalf("signed in as %+v (err %v)", id, err)
			}
		})
	}
	// A subject claim needs no verified email: it is configured per person.
	id, err := finish(t, map[string]any{"sub": "u-1", "email": "grace@example.com"}, func(c *signin.Config) { c.Claim = "sub" })
	if err != nil || id.Value != "u-1" {
		t.Fatalf("by subject: %+v, %v", id, err)
	}
}

// A token for several clients counts only when its azp is our client id.
func TestSignInChecksTheAuthorizedParty(t *testing.T) {
	base := func(extra map[string]any) map[string]any {
		c := map[string]any{"sub": "u-1", "email": "grace@example.com", "email_verified": true}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	var se *signin.Error
	for _, tc := range []struct {
		name   string
		claims map[string]any
	}{
		{"several audiences, no azp", base(map[string]any{"aud": []string{"countersign", "other-app"}})},
		{"several audiences, azp of another client", base(map[string]any{"aud": []string{"countersign", "other-app"}, "azp": "other-app"})},
		{"one audience, azp of another client", base(map[string]any{"azp": "other-app"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if id, err := finish(t, tc.claims, nil); !errors.As(err, &se) {
				t.Fatalf("signed in as %+v (err %v)", id, err)
			}
		})
	}
	id, err := finish(t, base(map[string]any{"aud": []string{"other-app", "countersign"}, "azp": "countersign"}), nil)
	if err != nil || id.Value != "grace@example.com" {
		t.Fatalf("several audiences with our azp: %+v, %v", id, err)
	}
}
