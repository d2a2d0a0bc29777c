package receipt_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func seedKey(t testing.TB, kid string, b byte) receipt.SigningKey {
	t.Helper()
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = b
	}
	k, err := receipt.KeyFromSeed(kid, seed)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newSigner(t testing.TB, keys ...receipt.SigningKey) *receipt.Signer {
	t.Helper()
	s, err := receipt.NewSigner(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// approvedOp is an operation as the worker holds it when it wins the claim.
func approvedOp(key string) *approval.Operation {
	return &approval.Operation{
		Key: key, Action: "http.request", PayloadHash: "sha256:" + strings.Repeat("ab", 32),
		Route:     approval.Route{Required: 2},
		Approvals: []approval.Decision{{Approver: "grace", Via: "email", At: t0.Add(-time.Minute)}, {Approver: "ada", Via: "slack", At: t0.Add(-30 * time.Second)}},
	}
}

// mint mints the receipt of one write of op at time at, the way an action
// does inside an execution.
func mint(t testing.TB, s approval.ReceiptSigner, op *approval.Operation, at time.Time, h *approval.ReceiptHTTP) string {
	t.Helper()
	c := approval.NewCountersigner(s, "https://countersign.example", op, func() time.Time { return at })
	tok, err := c.Mint(approval.ReceiptRequest{Audience: "calendar", HTTP: h})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func patch(body string) *approval.ReceiptHTTP {
	return &approval.ReceiptHTTP{Method: "PATCH", URL: "https://calendar.example/api/events/7?notify=1",
		BodySHA256: receipt.BodySHA256([]byte(body)), IfMatch: `"v3"`}
}

const opKey = "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"

func TestReceiptHasTheClaimsOfTheSpec(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	tok := mint(t, s, approvedOp(opKey), t0, patch(`{"title":"Retro"}`))

	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %s", tok)
	}
	head, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if got, want := string(head), `{"alg":"EdDSA","kid":"k1","typ":"countersign-receipt+jwt"}`; got != want {
		t.Errorf("header = %s, want %s", got, want)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	want := fmt.Sprintf(`{"iss":"https://countersign.example","jti":"%s","iat":%d,"exp":%d,"aud":"calendar","act":"http.request",`+
		`"ph":"sha256:%s","http":{"method":"PATCH","url":"https://calendar.example/api/events/7?notify=1","body_sha256":"%s","if_match":"\"v3\""},`+
		`"apr":[{"sub":"grace","via":"email","at":"2026-12-01T08:59:00Z"},{"sub":"ada","via":"slack","at":"2026-12-01T08:59:30Z"}],"req":2}`,
		opKey, t0.Unix(), t0.Add(5*time.Minute).Unix(), strings.Repeat("ab", 32), receipt.BodySHA256([]byte(`{"title":"Retro"}`)))
	if string(payload) != want {
		t.Errorf("claims =\n%s\nwant\n%s", payload, want)
	}

	c, err := receipt.Verify(context.Background(), tok, s.Keys(), receipt.Expect{Audience: "calendar", Issuer: "https://countersign.example/", Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != opKey || c.Required != 2 || len(c.Approvals) != 2 || c.HTTP.IfMatch != `"v3"` {
		t.Errorf("claims = %+v", c)
	}
}

func TestVerifyRefuses(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	other := newSigner(t, seedKey(t, "k1", 2)) // same kid, another key
	stranger := newSigner(t, seedKey(t, "k9", 3))
	good := mint(t, s, approvedOp(opKey), t0, patch("{}"))
	parts := strings.Split(good, ".")
	forged := func(claims map[string]any) string {
		b, _ := json.Marshal(claims)
		return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
	}
	hs256 := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","kid":"k1","typ":"countersign-receipt+jwt"}`)) + "." + parts[1] + "." + parts[2]
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"k1","typ":"countersign-receipt+jwt"}`)) + "." + parts[1] + "."
	checkpoint, err := s.SignJWS("countersign-checkpoint+jwt", []byte(parts[1]))
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		token  string
		expect receipt.Expect
		reason receipt.Reason
	}{
		{"empty", "  ", receipt.Expect{Now: t0}, receipt.ReasonMissing},
		{"garbage", "not.a.jws", receipt.Expect{Now: t0}, receipt.ReasonMalformed},
		{"too large", strings.Repeat("a", receipt.MaxTokenBytes+1), receipt.Expect{Now: t0}, receipt.ReasonMalformed},
		{"alg HS256", hs256, receipt.Expect{Now: t0}, receipt.ReasonMalformed},
		{"alg none", none, receipt.Expect{Now: t0}, receipt.ReasonMalformed},
		{"another type signed by the same key", checkpoint, receipt.Expect{Now: t0}, receipt.ReasonMalformed},
		{"edited claims", forged(map[string]any{"iss": "x", "jti": opKey, "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix(), "aud": "calendar", "act": "http.request", "ph": "sha256:00"}),
			receipt.Expect{Now: t0}, receipt.ReasonBadSignature},
		{"same kid, other key", mint(t, other, approvedOp(opKey), t0, patch("{}")), receipt.Expect{Now: t0}, receipt.ReasonBadSignature},
		{"unknown key", mint(t, stranger, approvedOp(opKey), t0, patch("{}")), receipt.Expect{Now: t0}, receipt.ReasonUnknownKey},
		{"expired", good, receipt.Expect{Now: t0.Add(5*time.Minute + receipt.DefaultLeeway + time.Second)}, receipt.ReasonExpired},
		{"expired, no leeway", good, receipt.Expect{Now: t0.Add(5*time.Minute + time.Second), Leeway: -1}, receipt.ReasonExpired},
		{"from the future", good, receipt.Expect{Now: t0.Add(-time.Minute)}, receipt.ReasonNotYetValid},
		{"another audience", good, receipt.Expect{Now: t0, Audience: "billing"}, receipt.ReasonWrongAudience},
		{"another issuer", good, receipt.Expect{Now: t0, Issuer: "https://evil.example"}, receipt.ReasonWrongIssuer},
		{"another body", good, receipt.Expect{Now: t0, Request: &receipt.Request{Method: "PATCH", URL: patch("").URL, BodySHA256: receipt.BodySHA256([]byte(`{"x":1}`))}}, receipt.ReasonNotCovered},
		{"another method", good, receipt.Expect{Now: t0, Request: &receipt.Request{Method: "DELETE", URL: patch("").URL, BodySHA256: patch("{}").BodySHA256}}, receipt.ReasonNotCovered},
		{"another path", good, receipt.Expect{Now: t0, Request: &receipt.Request{Method: "PATCH", URL: "https://calendar.example/api/events/8?notify=1", BodySHA256: patch("{}").BodySHA256}}, receipt.ReasonNotCovered},
		{"another query", good, receipt.Expect{Now: t0, Request: &receipt.Request{Method: "PATCH", URL: "https://calendar.example/api/events/7", BodySHA256: patch("{}").BodySHA256}}, receipt.ReasonNotCovered},
		{"another host", good, receipt.Expect{Now: t0, Request: &receipt.Request{Method: "PATCH", URL: "https://evil.example/api/events/7?notify=1", BodySHA256: patch("{}").BodySHA256}}, receipt.ReasonNotCovered},
		{"another If-Match", good, receipt.Expect{Now: t0, Request: &receipt.Request{Method: "PATCH", URL: patch("").URL, BodySHA256: patch("{}").BodySHA256, IfMatch: `"v4"`, CheckIfMatch: true}}, receipt.ReasonNotCovered},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := receipt.Verify(context.Background(), tc.token, s.Keys(), tc.expect)
			if got := receipt.ReasonOf(err); got != tc.reason {
				t.Fatalf("reason = %q (%v), want %q", got, err, tc.reason)
			}
			if strings.Contains(err.Error(), tc.token) && len(tc.token) > 10 {
				t.Errorf("the error repeats the token: %v", err)
			}
		})
	}
	// And what is right passes, with equivalent spellings of the URL.
	for _, u := range []string{"https://calendar.example/api/events/7?notify=1", "HTTPS://Calendar.Example:443/api/events/7?notify=1"} {
		if _, err := receipt.Verify(context.Background(), good, s.Keys(), receipt.Expect{Now: t0, Audience: "calendar",
			Request: &receipt.Request{Method: "patch", URL: u, BodySHA256: receipt.BodySHA256([]byte("{}")), IfMatch: `"v3"`, CheckIfMatch: true}}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	// Whitespace from a folded email header is ignored.
	folded := good[:40] + "\r\n " + good[40:80] + " " + good[80:]
	if _, err := receipt.Verify(context.Background(), folded, s.Keys(), receipt.Expect{Now: t0}); err != nil {
		t.Errorf("folded: %v", err)
	}
}

// TestRotationKeepsOldReceiptsVerifiable: after a new key goes first, the
// new one signs and receipts of the old one still verify, since it stays
// published; once it is dropped they are refused as unknown_key.
func TestRotationKeepsOldReceiptsVerifiable(t *testing.T) {
	k1, k2 := seedKey(t, "2026-01", 1), seedKey(t, "2026-06", 2)
	before := newSigner(t, k1)
	old := mint(t, before, approvedOp(opKey), t0, patch("{}"))

	after := newSigner(t, k2, k1)
	if after.KeyID() != "2026-06" {
		t.Fatalf("signing kid = %s", after.KeyID())
	}
	jwks, err := receipt.ParseJWKS(after.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(jwks.IDs(), ","); got != "2026-06,2026-01" {
		t.Fatalf("published kids = %s", got)
	}
	fresh := mint(t, after, approvedOp("op_bbbbbbbbbbbbbbbbbbbbbbbbbb"), t0, patch("{}"))
	for name, tok := range map[string]string{"old": old, "new": fresh} {
		if _, err := receipt.Verify(context.Background(), tok, jwks, receipt.Expect{Now: t0}); err != nil {
			t.Errorf("%s receipt: %v", name, err)
		}
	}
	if kid, _, _ := receipt.Peek(fresh); kid != "2026-06" {
		t.Errorf("new receipt signed by %s", kid)
	}
	retired := newSigner(t, k2)
	if _, err := receipt.Verify(context.Background(), old, retired.Keys(), receipt.Expect{Now: t0}); receipt.ReasonOf(err) != receipt.ReasonUnknownKey {
		t.Errorf("old receipt after its key was retired: %v", err)
	}
}

func TestJWKSPublishesOnlyPublicKeys(t *testing.T) {
	k := seedKey(t, "k1", 7)
	s := newSigner(t, k)
	doc := string(s.JWKS())
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal([]byte(doc), &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks = %s (%v)", doc, err)
	}
	got := set.Keys[0]
	pub := base64.RawURLEncoding.EncodeToString(k.Private.Public().(ed25519.PublicKey))
	if got["kty"] != "OKP" || got["crv"] != "Ed25519" || got["x"] != pub || got["kid"] != "k1" || got["alg"] != "EdDSA" || got["use"] != "sig" || len(got) != 6 {
		t.Errorf("key = %v", got)
	}
	seed := base64.RawURLEncoding.EncodeToString(k.Private.Seed())
	for _, secret := range []string{seed, base64.StdEncoding.EncodeToString(k.Private.Seed())} {
		for _, text := range []string{doc, fmt.Sprint(s), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", s), fmt.Sprint(k), fmt.Sprintf("%+v", k), fmt.Sprintf("%#v", k)} {
			if strings.Contains(text, secret) {
				t.Errorf("the seed shows in %q", text)
			}
		}
	}
}

func TestParseJWKSRefuses(t *testing.T) {
	pub := base64.RawURLEncoding.EncodeToString(seedKey(t, "k", 1).Private.Public().(ed25519.PublicKey))
	key := func(kid string) string { return `{"kty":"OKP","crv":"Ed25519","x":"` + pub + `","kid":"` + kid + `"}` }
	many := make([]string, receipt.MaxKeys+1)
	for i := range many {
		many[i] = key(fmt.Sprint(i))
	}
	cases := map[string]string{
		"not json":        `nope`,
		"no keys":         `{"keys":[]}`,
		"only RSA":        `{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","kid":"r"}]}`,
		"private key":     `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + pub + `","d":"` + pub + `","kid":"k"}]}`,
		"no kid":          `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + pub + `"}]}`,
		"duplicate kid":   `{"keys":[` + key("a") + `,` + key("a") + `]}`,
		"short key":       `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AAAA","kid":"k"}]}`,
		"too many keys":   `{"keys":[` + strings.Join(many, ",") + `]}`,
		"too large":       `{"keys":[` + key("a") + `],"pad":"` + strings.Repeat("x", receipt.MaxJWKSBytes) + `"}`,
		"keys not a list": `{"keys":{}}`,
	}
	for name, doc := range cases {
		if _, err := receipt.ParseJWKS([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Keys of other kinds next to ours are ignored.
	set, err := receipt.ParseJWKS([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","kid":"r"},{"kty":"OKP","crv":"X25519","x":"` + pub + `","kid":"x"},` + key("mine") + `]}`))
	if err != nil || strings.Join(set.IDs(), ",") != "mine" {
		t.Errorf("mixed set: %v %v", set, err)
	}
}

func TestKeysAndSignerRefuseBadInput(t *testing.T) {
	if _, err := receipt.KeyFromSeed("k1", make([]byte, 31)); err == nil {
		t.Error("31-byte seed accepted")
	}
	if _, err := receipt.KeyFromSeed("bad kid", make([]byte, 32)); err == nil {
		t.Error("kid with a space accepted")
	}
	if _, err := receipt.NewSigner(); err == nil {
		t.Error("no keys accepted")
	}
	if _, err := receipt.NewSigner(seedKey(t, "a", 1), seedKey(t, "a", 2)); err == nil {
		t.Error("two keys with one kid accepted")
	}
	s := newSigner(t, seedKey(t, "a", 1))
	if _, err := s.SignJWS(receipt.Type, []byte("{}")); err == nil {
		t.Error("SignJWS made a receipt")
	}
	g1, err1 := receipt.GenerateKey()
	g2, err2 := receipt.GenerateKey()
	if err1 != nil || err2 != nil || g1.ID == g2.ID || !strings.HasPrefix(g1.ID, "gen-") || !receipt.ValidKeyID(g1.ID) {
		t.Errorf("generated %s %s (%v %v)", g1.ID, g2.ID, err1, err2)
	}
}

// TestCountersignerMintsEachIDOnce: one receipt per id per execution;
// bulk items get "op_…:N"; no signer means no receipt, and no error.
func TestCountersignerMintsEachIDOnce(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	c := approval.NewCountersigner(s, "https://cs.example", approvedOp(opKey), func() time.Time { return t0 })
	if _, err := c.Mint(approval.ReceiptRequest{Audience: "calendar"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mint(approval.ReceiptRequest{Audience: "calendar"}); err == nil {
		t.Error("a second receipt for the same id")
	}
	item, err := c.Mint(approval.ReceiptRequest{Audience: "calendar", Item: "3"})
	if err != nil {
		t.Fatal(err)
	}
	if _, cl, _ := receipt.Peek(item); cl.ID != opKey+":3" {
		t.Errorf("item jti = %s", cl.ID)
	}
	if _, err := c.Mint(approval.ReceiptRequest{Audience: "calendar", Item: "x:1"}); err == nil {
		t.Error("item id x:1 accepted")
	}
	if _, err := c.Mint(approval.ReceiptRequest{}); err == nil {
		t.Error("no audience accepted")
	}
	if got := c.Minted(); len(got) != 2 || got[0].ID != opKey || got[1].ID != opKey+":3" {
		t.Errorf("minted = %v", got)
	}
	var none *approval.Countersigner
	if tok, err := none.Mint(approval.ReceiptRequest{Audience: "x"}); tok != "" || err != nil {
		t.Errorf("nil countersigner: %q %v", tok, err)
	}
	if approval.CountersignerFrom(context.Background()) != nil {
		t.Error("a countersigner outside an execution")
	}
}
