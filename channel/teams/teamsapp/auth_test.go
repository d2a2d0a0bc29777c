package teamsapp_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/faketeams"
)

// Only an activity with a valid Bot Framework token counts: RS256 with a
// key of the JWKS, the metadata's issuer, the bot's app id as audience,
// current within five minutes, and the activity's serviceUrl.
func TestTokensAreChecked(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}})
	op := e.prepareSend(t, "Guarded", "Only Teams may click.")
	g := cardOf(t, e.cards(t, op.Key, 2), grace.ID)
	click := e.fake.ClickOn(g, "approve", grace, "")
	claims := func(f func(*faketeams.TokenClaims)) faketeams.Sign { return faketeams.Sign{Claims: f} }
	for _, tc := range []struct {
		name string
		sign faketeams.Sign
		// header overrides the Authorization header when set.
		header string
		// activity changes the activity after the token was made.
		activity func(*faketeams.Click)
		ok       bool
	}{
		{name: "no token", header: "-"},
		{name: "not bearer", header: "Basic Z3JhY2U6cGFzcw=="},
		{name: "garbage", header: "Bearer not.a.jwt"},
		{name: "alg none", sign: faketeams.Sign{Alg: "none"}},
		{name: "HS256 with the public key", sign: faketeams.Sign{Alg: "HS256"}},
		{name: "a key not in the JWKS", sign: faketeams.Sign{Rogue: true}},
		{name: "another bot's token", sign: claims(func(c *faketeams.TokenClaims) { c.Audience = "00000000-0000-4000-8000-0000000000ff" })},
		{name: "another issuer", sign: claims(func(c *faketeams.TokenClaims) { c.Issuer = "https://sts.windows.net/evil/" })},
		{name: "expired beyond the skew", sign: claims(func(c *faketeams.TokenClaims) { c.Expiry = time.Now().Add(-6 * time.Minute) })},
		{name: "not yet valid beyond the skew", sign: claims(func(c *faketeams.TokenClaims) { c.IssuedAt = time.Now().Add(6 * time.Minute) })},
		{name: "no expiry", sign: claims(func(c *faketeams.TokenClaims) { c.NoExpiry = true })},
		{name: "no serviceurl", sign: claims(func(c *faketeams.TokenClaims) { c.ServiceURL = "" })},
		{name: "token for another service", sign: claims(func(c *faketeams.TokenClaims) { c.ServiceURL = "https://smba.evil.example/" })},
		{name: "activity from another service", activity: func(c *faketeams.Click) { c.ServiceURL = "https://smba.evil.example/teams/" }},
		{name: "channel the key is not endorsed for", activity: func(c *faketeams.Click) { c.ChannelID = "webchat" }},
		{name: "expired within the skew", ok: true, sign: claims(func(c *faketeams.TokenClaims) { c.Expiry = time.Now().Add(-4 * time.Minute) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := click
			c.ID = ""
			req := e.fake.Invoke(target, c, tc.sign)
			if tc.activity != nil {
				tc.activity(&c)
				tok := req.Header.Get("Authorization")
				req = e.fake.Invoke(target, c, tc.sign)
				req.Header.Set("Authorization", tok) // the token of the original activity
			}
			switch tc.header {
			case "":
			case "-":
				req.Header.Del("Authorization")
			default:
				req.Header.Set("Authorization", tc.header)
			}
			r := e.do(t, req)
			if tc.ok {
				if r.HTTPStatus != 200 || !strings.Contains(faketeams.Text(r.Card), "Your approval was recorded") {
					t.Fatalf("HTTP %d %s", r.HTTPStatus, r.Raw)
				}
				return
			}
			var body struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.Unmarshal([]byte(r.Raw), &body)
			if r.HTTPStatus != 401 || body.Error.Code != "unauthenticated" {
				t.Fatalf("HTTP %d %s, want 401 unauthenticated", r.HTTPStatus, r.Raw)
			}
			if cur := e.get(t, op.Key); len(cur.Approvals) != 0 {
				t.Fatalf("a refused request counted: %+v", cur.Approvals)
			}
		})
	}
	e.waitStatus(t, op.Key, approval.StatusSucceeded)
}

// Keys rotate: a token signed with a new key makes the service read the
// keys again (at most once a minute), and the old key stops working.
func TestKeyRotation(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}, required: 2})
	op := e.prepareSend(t, "Rotate", "Keys change.")
	cards := e.cards(t, op.Key, 2)
	g, a := cardOf(t, cards, grace.ID), cardOf(t, cards, strings.ToUpper(ada.AADObjectID))
	// The first click reads the keys.
	r := e.do(t, e.fake.Invoke(target, e.fake.ClickOn(g, "reject", stranger, "x"), faketeams.Sign{}))
	if r.HTTPStatus != 200 {
		t.Fatalf("HTTP %d %s", r.HTTPStatus, r.Raw)
	}
	e.fake.RotateKeys()
	reads := len(e.fake.Calls("keys"))
	// Within the minute, an unknown key is refused without a new read.
	if r := e.do(t, e.fake.Invoke(target, e.fake.ClickOn(g, "approve", grace, ""), faketeams.Sign{})); r.HTTPStatus != 401 {
		t.Fatalf("HTTP %d %s", r.HTTPStatus, r.Raw)
	}
	for range 20 { // forged key ids cannot make it read the keys again
		e.do(t, e.fake.Invoke(target, e.fake.ClickOn(g, "approve", grace, ""), faketeams.Sign{Rogue: true}))
	}
	if n := len(e.fake.Calls("keys")); n != reads {
		t.Fatalf("the keys were read %d more times", n-reads)
	}
	e.clock.Add(2 * time.Minute)
	if r := e.click(t, g, "approve", grace, ""); !strings.Contains(faketeams.Text(r.Card), "Your approval was recorded") {
		t.Fatalf("new key: %s", r.Raw)
	}
	if n := len(e.fake.Calls("keys")); n != reads+1 {
		t.Fatalf("keys read %d times after the rotation, want 1", n-reads)
	}
	if r := e.do(t, e.fake.Invoke(target, e.fake.ClickOn(a, "approve", ada, ""), faketeams.Sign{OldKey: true})); r.HTTPStatus != 401 {
		t.Fatalf("the retired key still works: HTTP %d", r.HTTPStatus)
	}
	if cur := e.get(t, op.Key); len(cur.Approvals) != 1 {
		t.Fatalf("approvals %+v", cur.Approvals)
	}
}

// Activities other than card clicks are acknowledged and do nothing.
func TestOtherActivitiesAreAcknowledged(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}})
	for _, body := range []string{
		`{"type":"message","text":"hi bot","channelId":"msteams","serviceUrl":"` + e.fake.ServiceURL() + `"}`,
		`{"type":"conversationUpdate","channelId":"msteams","serviceUrl":"` + e.fake.ServiceURL() + `"}`,
	} {
		req := e.fake.Invoke(target, faketeams.Click{}, faketeams.Sign{})
		req.Body = nopCloser(body)
		req.ContentLength = int64(len(body))
		if r := e.do(t, req); r.HTTPStatus != 200 || r.Raw != "" {
			t.Fatalf("%s: HTTP %d %q", body, r.HTTPStatus, r.Raw)
		}
	}
	req := e.fake.Invoke(target, faketeams.Click{}, faketeams.Sign{})
	body := `{"type":"invoke","name":"composeExtension/query","channelId":"msteams","serviceUrl":"` + e.fake.ServiceURL() + `"}`
	req.Body, req.ContentLength = nopCloser(body), int64(len(body))
	if r := e.do(t, req); r.HTTPStatus != 200 || r.StatusCode != 501 {
		t.Fatalf("other invoke: HTTP %d %s", r.HTTPStatus, r.Raw)
	}
	deep := `{"type":"invoke","value":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40) + `}`
	req = e.fake.Invoke(target, faketeams.Click{}, faketeams.Sign{})
	req.Body, req.ContentLength = nopCloser(deep), int64(len(deep))
	if r := e.do(t, req); r.HTTPStatus != 400 {
		t.Fatalf("deep JSON: HTTP %d %s", r.HTTPStatus, r.Raw)
	}
	huge := `{"type":"message","text":"` + strings.Repeat("x", 70<<10) + `"}`
	req = e.fake.Invoke(target, faketeams.Click{}, faketeams.Sign{})
	req.Body, req.ContentLength = nopCloser(huge), int64(len(huge))
	if r := e.do(t, req); r.HTTPStatus != 413 {
		t.Fatalf("huge: HTTP %d", r.HTTPStatus)
	}
}

func nopCloser(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }
