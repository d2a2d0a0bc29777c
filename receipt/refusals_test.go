package receipt_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

// Each refusal of the receipt verifier and of the middleware, one rule
// broken at a time, with the boundaries of the clock checks.

// handmade signs header and claims with the ed25519 key of seedKey(…, 1),
// so that a test can write what Signer would never write.
func handmade(t *testing.T, header, claims any) string {
	t.Helper()
	seed := bytes.Repeat([]byte{1}, 32)
	priv := ed25519.NewKeyFromSeed(seed)
	enc := func(v any) string {
		b, ok := v.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	in := enc(header) + "." + enc(claims)
	return in + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(in)))
}

func fullClaims() map[string]any {
	return map[string]any{"iss": "https://countersign.example", "jti": opKey, "iat": t0.Unix(), "exp": t0.Add(5 * time.Minute).Unix(),
		"aud": "calendar", "act": "http.request", "ph": "sha256:00",
		"http": map[string]any{"method": "POST", "url": "https://calendar.example/x", "body_sha256": receipt.BodySHA256(nil)}}
}

var goodHeader = map[string]any{"alg": "EdDSA", "kid": "k1", "typ": receipt.Type}

type brokenKeys struct{}

func (brokenKeys) Key(context.Context, string) (ed25519.PublicKey, error) {
	return nil, errors.New("jwks fetch: connection refused")
}

func TestVerifyEachRefusalOfTheForm(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	verify := func(tok string) error {
		_, err := receipt.Verify(context.Background(), tok, s.Keys(), receipt.Expect{Now: t0})
		return err
	}
	if err := verify(handmade(t, goodHeader, fullClaims())); err != nil {
		t.Fatalf("the handmade receipt itself: %v", err)
	}
	for _, claim := range []string{"iss", "jti", "iat", "exp", "aud", "act", "ph"} {
		c := fullClaims()
		delete(c, claim)
		if err := verify(handmade(t, goodHeader, c)); receipt.ReasonOf(err) != receipt.ReasonMalformed || !strings.Contains(err.Error(), "required claim") {
			t.Errorf("without %s: %v", claim, err)
		}
	}
	cases := map[string]string{
		"claims that are not an object": handmade(t, goodHeader, []byte(`["iss"]`)),
		"no typ":                        handmade(t, map[string]any{"alg": "EdDSA", "kid": "k1"}, fullClaims()),
		"the checkpoint typ":            handmade(t, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": "countersign-checkpoint+jwt"}, fullClaims()),
		"no kid":                        handmade(t, map[string]any{"alg": "EdDSA", "typ": receipt.Type}, fullClaims()),
		"two dots too many":             handmade(t, goodHeader, fullClaims()) + ".x",
	}
	for name, tok := range cases {
		if err := verify(tok); receipt.ReasonOf(err) != receipt.ReasonMalformed {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := verify(cases["claims that are not an object"]); err == nil || !strings.Contains(err.Error(), "not a receipt's") {
		t.Errorf("claims that are not an object: %v", err)
	}
	// The typ is compared without case (RFC 7515 §4.1.9).
	if err := verify(handmade(t, map[string]any{"alg": "EdDSA", "kid": "k1", "typ": strings.ToUpper(receipt.Type)}, fullClaims())); err != nil {
		t.Errorf("typ in capitals: %v", err)
	}
	// Keys that cannot be read: unavailable, with the cause kept for logs
	// and left out of the message.
	_, err := receipt.Verify(context.Background(), handmade(t, goodHeader, fullClaims()), brokenKeys{}, receipt.Expect{Now: t0})
	if receipt.ReasonOf(err) != receipt.ReasonUnavailable || errors.Unwrap(err) == nil || strings.Contains(err.Error(), "connection refused") {
		t.Errorf("broken keys: %v", err)
	}
	if receipt.ReasonOf(nil) != "" || receipt.ReasonOf(errors.New("x")) != "" {
		t.Error("ReasonOf of a non-refusal")
	}
	// A value from the token is clipped in the message.
	long := fullClaims()
	long["aud"] = strings.Repeat("a", 500)
	_, err = receipt.Verify(context.Background(), handmade(t, goodHeader, long), s.Keys(), receipt.Expect{Now: t0, Audience: "calendar"})
	if receipt.ReasonOf(err) != receipt.ReasonWrongAudience || strings.Contains(err.Error(), strings.Repeat("a", 201)) {
		t.Errorf("long audience: %v", err)
	}
}

func TestVerifyEachRefusalOfTheClock(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	tok := handmade(t, goodHeader, fullClaims()) // iat t0, exp t0+5m
	exp := t0.Add(5 * time.Minute)
	cases := []struct {
		name   string
		now    time.Time
		leeway time.Duration
		want   receipt.Reason
	}{
		{"at exp plus the leeway", exp.Add(receipt.DefaultLeeway), 0, ""},
		{"a second later", exp.Add(receipt.DefaultLeeway + time.Second), 0, receipt.ReasonExpired},
		{"at exp, no leeway", exp, -1, ""},
		{"a second after exp, no leeway", exp.Add(time.Second), -1, receipt.ReasonExpired},
		{"at exp plus its own leeway", exp.Add(5 * time.Second), 5 * time.Second, ""},
		{"past its own leeway", exp.Add(6 * time.Second), 5 * time.Second, receipt.ReasonExpired},
		{"iat within the leeway ahead", t0.Add(-receipt.DefaultLeeway), 0, ""},
		{"iat further ahead", t0.Add(-receipt.DefaultLeeway - time.Second), 0, receipt.ReasonNotYetValid},
		{"iat a second ahead, no leeway", t0.Add(-time.Second), -1, receipt.ReasonNotYetValid},
		{"at iat, no leeway", t0, -1, ""},
	}
	for _, tc := range cases {
		_, err := receipt.Verify(context.Background(), tok, s.Keys(), receipt.Expect{Now: tc.now, Leeway: tc.leeway})
		if got := receipt.ReasonOf(err); got != tc.want {
			t.Errorf("%s: %q (%v), want %q", tc.name, got, err, tc.want)
		}
	}
	// Without a clock, the real one: a receipt of 2026-12-01 is long expired
	// by then, or not yet valid before.
	if _, err := receipt.Verify(context.Background(), tok, s.Keys(), receipt.Expect{}); err == nil {
		t.Error("the zero Now was not replaced by the real clock")
	}
}

func TestVerifyEachRefusalOfCoverage(t *testing.T) {
	post := func(url string) *receipt.Claims {
		return &receipt.Claims{Action: "http.request", HTTP: &approval.ReceiptHTTP{Method: "POST", URL: url,
			BodySHA256: receipt.BodySHA256([]byte("{}")), IfMatch: `"v1"`}}
	}
	req := func(url string) receipt.Request {
		return receipt.Request{Method: "POST", URL: url, BodySHA256: receipt.BodySHA256([]byte("{}")), IfMatch: `"v1"`, CheckIfMatch: true}
	}
	cases := []struct {
		name   string
		claims *receipt.Claims
		req    receipt.Request
		ok     bool
	}{
		{"the same write", post("https://t.example/a?b=1"), req("https://t.example/a?b=1"), true},
		{"an email receipt", &receipt.Claims{Action: "email.send"}, req("https://t.example/a"), false},
		{"http for https", post("https://t.example/a"), req("http://t.example/a"), false},
		{"another port", post("https://t.example/a"), req("https://t.example:8443/a"), false},
		{"the default https port", post("https://t.example/a"), req("https://t.example:443/a"), true},
		{"the default http port", post("http://t.example/a"), req("http://t.example:80/a"), true},
		{"port 443 on http is not the default", post("http://t.example/a"), req("http://t.example:443/a"), false},
		{"port 80 on https is not the default", post("https://t.example/a"), req("https://t.example:80/a"), false},
		{"an escaped slash", post("https://t.example/a%2Fb"), req("https://t.example/a/b"), false},
		{"another query", post("https://t.example/a?b=1"), req("https://t.example/a?b=2"), false},
		{"a URL that does not parse", post("https://t.example/a"), req("https://t.example/%zz"), false},
		{"a claim that does not parse", post("https://t.example/%zz"), req("https://t.example/a"), false},
		{"no If-Match where one was approved", post("https://t.example/a"), receipt.Request{Method: "POST", URL: "https://t.example/a",
			BodySHA256: receipt.BodySHA256([]byte("{}")), CheckIfMatch: true}, false},
		{"If-Match not checked", post("https://t.example/a"), receipt.Request{Method: "POST", URL: "https://t.example/a",
			BodySHA256: receipt.BodySHA256([]byte("{}"))}, true},
		{"a body hash in capitals", post("https://t.example/a"), receipt.Request{Method: "post", URL: "https://t.example/a",
			BodySHA256: strings.ToUpper(receipt.BodySHA256([]byte("{}"))), IfMatch: `"v1"`, CheckIfMatch: true}, true},
	}
	for _, tc := range cases {
		err := receipt.Covers(tc.claims, tc.req)
		if tc.ok != (err == nil) || err != nil && receipt.ReasonOf(err) != receipt.ReasonNotCovered {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestPeekEachRefusalShowsWithoutTrusting(t *testing.T) {
	other := handmade(t, map[string]any{"alg": "EdDSA", "kid": "k7", "typ": receipt.Type}, fullClaims())
	kid, c, err := receipt.Peek(other)
	if err != nil || kid != "k7" || c.ID != opKey || c.Audience != "calendar" {
		t.Fatalf("peek: %q %+v %v", kid, c, err)
	}
	for name, tok := range map[string]string{
		"too large": strings.Repeat("a", receipt.MaxTokenBytes+1), "garbage": "a.b",
		"not claims": handmade(t, goodHeader, []byte(`"x"`)),
	} {
		if _, _, err := receipt.Peek(tok); receipt.ReasonOf(err) != receipt.ReasonMalformed {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// recordingCache is a replay cache that records the expiry it is asked to
// keep an id until.
type recordingCache struct {
	*receipt.MemoryReplayCache
	until []time.Time
}

func (r *recordingCache) Use(ctx context.Context, id string, exp time.Time) (bool, error) {
	r.until = append(r.until, exp)
	return r.MemoryReplayCache.Use(ctx, id, exp)
}

func TestMiddlewareEachRefusal(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	cache := &recordingCache{MemoryReplayCache: receipt.NewMemoryReplayCache(0, func() time.Time { return t0 })}
	g := newGuardedTarget(t, s.Keys(), func(c *receipt.Config) { c.Replay = cache; c.MaxBody = 8; c.Leeway = 10 * time.Second })
	do := func(method, path, body string, header http.Header) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, g.URL+path, strings.NewReader(body))
		for k, vs := range header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	w := sent{method: "PUT", path: "/e/1", body: "12345678", ifMatch: `"v3"`}
	tok := g.receiptFor(t, s, opKey, w, t0)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}

	refusals := []struct {
		name            string
		method, body    string
		header          http.Header
		status          int
		reason, message string
	}{
		{"two receipts", "PUT", w.body, h(receipt.Header, tok, receipt.Header, tok, "If-Match", `"v3"`), 401, "malformed", "more than one"},
		{"a blank receipt", "PUT", w.body, h(receipt.Header, "  ", "If-Match", `"v3"`), 401, "missing", "needs a Countersign-Receipt"},
		{"no If-Match where one was approved", "PUT", w.body, h(receipt.Header, tok), 401, "not_covered", "If-Match"},
		{"another If-Match", "PUT", w.body, h(receipt.Header, tok, "If-Match", `"v4"`), 401, "not_covered", "If-Match"},
		{"a body one byte over the limit", "PUT", w.body + "9", h(receipt.Header, tok, "If-Match", `"v3"`), 413, "", "larger than 8 bytes"},
		{"a receipt past its exp and this target's leeway", "PUT", w.body,
			h(receipt.Header, g.receiptFor(t, s, opKey, w, t0.Add(-5*time.Minute-11*time.Second)), "If-Match", `"v3"`), 401, "expired", "expired"},
	}
	for _, tc := range refusals {
		resp, body := do(tc.method, w.path, tc.body, tc.header)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.message) || !strings.HasPrefix(body, "countersign receipt refused: ") {
			t.Errorf("%s: %d %q", tc.name, resp.StatusCode, body)
			continue
		}
		auth := resp.Header.Get("WWW-Authenticate")
		if tc.status == 401 && auth != `Countersign-Receipt error="`+tc.reason+`"` || tc.status != 401 && auth != "" {
			t.Errorf("%s: WWW-Authenticate %q", tc.name, auth)
		}
		if resp.Header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("%s: headers %v", tc.name, resp.Header)
		}
	}
	if len(g.handled()) != 0 || len(cache.until) != 0 {
		t.Fatalf("refusals reached the handler (%d) or spent the receipt (%d)", len(g.handled()), len(cache.until))
	}
	// Within this target's leeway (10 s, not the default 30 s) it passes,
	// a body of exactly the limit is read whole, and the receipt is kept
	// until its exp plus the leeway.
	late := g.receiptFor(t, s, opKey, w, t0.Add(-5*time.Minute-10*time.Second))
	if resp, body := do("PUT", w.path, w.body, h(receipt.Header, late, "If-Match", `"v3"`)); resp.StatusCode != 200 {
		t.Fatalf("within the leeway: %d %s", resp.StatusCode, body)
	}
	if got := g.handled(); len(got) != 1 || got[0] != "PUT 12345678" {
		t.Fatalf("handled %q", got)
	}
	if want := t0.Add(-10 * time.Second).Add(10 * time.Second); len(cache.until) != 1 || !cache.until[0].Equal(want) {
		t.Fatalf("kept until %v, want %v", cache.until, want)
	}
	// The same receipt again, at the same instant (its last one): the cache
	// still holds it.
	if resp, body := do("PUT", w.path, w.body, h(receipt.Header, late, "If-Match", `"v3"`)); resp.StatusCode != 401 || !strings.Contains(body, "replayed") {
		t.Fatalf("the same receipt at its last instant: %d %s", resp.StatusCode, body)
	}
	if resp, body := do("PUT", w.path, w.body, h(receipt.Header, tok, "If-Match", `"v3"`)); resp.StatusCode != 401 || !strings.Contains(body, "replayed") {
		t.Fatalf("another receipt of the same operation: %d %s", resp.StatusCode, body)
	}
	// Reads pass without a receipt; a method a target adds does not.
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		if resp, _ := do(m, w.path, "", nil); resp.StatusCode != 200 {
			t.Errorf("%s: %d", m, resp.StatusCode)
		}
	}
	strict := newGuardedTarget(t, s.Keys(), func(c *receipt.Config) { c.Methods = []string{"GET"} })
	if st, _ := strict.send(t, sent{method: "GET", path: "/x"}); st != 401 {
		t.Errorf("a GET where GET needs a receipt: %d", st)
	}
	if st, _ := strict.send(t, sent{method: "POST", path: "/x"}); st != 200 {
		t.Errorf("a POST where only GET needs one: %d", st)
	}
	// Keys that cannot be read: 503, and the cause stays out of the answer.
	down := newGuardedTarget(t, brokenKeys{}, nil)
	if st, body := down.send(t, sent{method: "POST", path: "/x", token: tok}); st != 503 || strings.Contains(body, "connection refused") ||
		!strings.Contains(body, "unavailable") {
		t.Errorf("keys down: %d %q", st, body)
	}
}

// TestMiddlewareEachRefusalOverTLS: the URL a receipt covers has the scheme
// the request came with.
func TestMiddlewareEachRefusalOverTLS(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	mw, err := receipt.Middleware(receipt.Config{Keys: s.Keys(), Audience: "calendar", Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	post := func(url string) int {
		tok := mint(t, s, approvedOp(approval.NewOperationKey()), t0, &approval.ReceiptHTTP{Method: "POST", URL: url, BodySHA256: receipt.BodySHA256(nil)})
		req, _ := http.NewRequest("POST", srv.URL+"/x", nil)
		req.Header.Set(receipt.Header, tok)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post(srv.URL + "/x"); st != 200 {
		t.Fatalf("https receipt over TLS: %d", st)
	}
	if st := post(strings.Replace(srv.URL, "https://", "http://", 1) + "/x"); st != 401 {
		t.Fatalf("http receipt over TLS: %d", st)
	}
}

func TestMemoryReplayCacheEachRefusal(t *testing.T) {
	now := t0
	c := receipt.NewMemoryReplayCache(2, func() time.Time { return now })
	use := func(id string, exp time.Time) (bool, error) { return c.Use(context.Background(), id, exp) }
	if ok, err := use("a", t0.Add(time.Minute)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := use("a", t0.Add(time.Hour)); ok || err != nil {
		t.Fatalf("replay: %v %v", ok, err)
	}
	if ok, err := use("b", t0.Add(2*time.Minute)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := use("c", t0.Add(time.Minute)); ok || !errors.Is(err, receipt.ErrReplayCacheFull) || c.Len() != 2 {
		t.Fatalf("full: %v %v %d", ok, err, c.Len())
	}
	// At a's expiry it is still held (a receipt is accepted up to that
	// instant); just after, it is forgotten (and only a).
	now = t0.Add(time.Minute)
	if ok, err := use("a", t0.Add(time.Hour)); ok || err != nil {
		t.Fatalf("a at its expiry: %v %v", ok, err)
	}
	now = t0.Add(time.Minute + time.Nanosecond)
	if ok, err := use("c", t0.Add(3*time.Minute)); !ok || err != nil || c.Len() != 2 {
		t.Fatalf("after a's expiry: %v %v %d", ok, err, c.Len())
	}
	if ok, _ := use("b", t0.Add(time.Hour)); ok {
		t.Fatal("b was forgotten before its expiry")
	}
	if ok, _ := use("a", t0.Add(time.Hour)); ok {
		t.Fatal("the cache is full, yet a went in")
	}
	now = t0.Add(2 * time.Minute)
	if ok, _ := use("b", t0.Add(time.Hour)); ok {
		t.Fatal("b was forgotten at its expiry")
	}
	if d := receipt.NewMemoryReplayCache(0, nil); d.Len() != 0 {
		t.Fatal(fmt.Sprint(d.Len()))
	}
}

// TestMiddlewareEachRefusalDefaultCache: the default replay cache holds
// many receipts (one per operation), refusing only replays.
func TestMiddlewareEachRefusalDefaultCache(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	g := newGuardedTarget(t, s.Keys(), nil)
	for i := range 3 {
		w := sent{method: "POST", path: "/invoices", body: fmt.Sprintf(`{"n":%d}`, i)}
		w.token = g.receiptFor(t, s, fmt.Sprintf("op_%026d", i), w, t0)
		if st, body := g.send(t, w); st != 200 {
			t.Fatalf("operation %d: %d %s", i, st, body)
		}
		if st, _ := g.send(t, w); st != 401 {
			t.Fatalf("operation %d again: %d", i, st)
		}
	}
}

// TestMiddlewareEachRefusalBodyCutShort: a body that ends before its
// Content-Length is refused as unreadable (400), not hashed as it came.
func TestMiddlewareEachRefusalBodyCutShort(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	g := newGuardedTarget(t, s.Keys(), nil)
	w := sent{method: "POST", path: "/x", body: "0123456789"}
	tok := g.receiptFor(t, s, opKey, w, t0)
	conn, err := net.Dial("tcp", g.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /x HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nContent-Length: 100\r\n\r\n0123456789", g.Listener.Addr(), receipt.Header, tok)
	_ = conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "could not be read") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if len(g.handled()) != 0 {
		t.Fatal("a cut body reached the handler")
	}
}

// TestMiddlewareEachRefusalOneByteLimit: a MaxBody of one byte is one
// byte, not the default.
func TestMiddlewareEachRefusalOneByteLimit(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	g := newGuardedTarget(t, s.Keys(), func(c *receipt.Config) { c.MaxBody = 1 })
	for body, want := range map[string]int{"x": 200, "xy": 413} {
		w := sent{method: "POST", path: "/x", body: body}
		w.token = g.receiptFor(t, s, "op_"+strings.Repeat(body[:1], 24)+fmt.Sprintf("%02d", len(body)), w, t0)
		if st, b := g.send(t, w); st != want {
			t.Fatalf("body %q: %d %s, want %d", body, st, b, want)
		}
	}
}
