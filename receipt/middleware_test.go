package receipt_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

// guardedTarget is a target API behind the middleware: it records what its
// handler received, so a test sees what got through.
type guardedTarget struct {
	*httptest.Server
	mu     sync.Mutex
	now    time.Time
	bodies []string
	jtis   []string
}

func (g *guardedTarget) clock() time.Time { g.mu.Lock(); defer g.mu.Unlock(); return g.now }
func (g *guardedTarget) setClock(t time.Time) {
	g.mu.Lock()
	g.now = t
	g.mu.Unlock()
}

func (g *guardedTarget) handled() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.bodies...)
}

func newGuardedTarget(t *testing.T, keys receipt.KeySource, mutate func(*receipt.Config)) *guardedTarget {
	t.Helper()
	g := &guardedTarget{now: t0}
	cfg := receipt.Config{Keys: keys, Audience: "calendar", Issuer: "https://countersign.example", Now: g.clock, MaxBody: 1 << 10}
	if mutate != nil {
		mutate(&cfg)
	}
	mw, err := receipt.Middleware(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.Server = httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		g.mu.Lock()
		g.bodies = append(g.bodies, r.Method+" "+string(b))
		if c := receipt.FromContext(r.Context()); c != nil {
			g.jtis = append(g.jtis, c.ID)
		}
		g.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})))
	t.Cleanup(g.Close)
	return g
}

type sent struct {
	method, path, body, token, ifMatch string
}

func (g *guardedTarget) send(t *testing.T, s sent) (int, string) {
	t.Helper()
	req, err := http.NewRequest(s.method, g.URL+s.path, strings.NewReader(s.body))
	if err != nil {
		t.Fatal(err)
	}
	if s.token != "" {
		req.Header.Set(receipt.Header, s.token)
	}
	if s.ifMatch != "" {
		req.Header.Set("If-Match", s.ifMatch)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// receiptFor mints a receipt for the write s of operation key on g.
func (g *guardedTarget) receiptFor(t *testing.T, signer approval.ReceiptSigner, key string, s sent, at time.Time) string {
	t.Helper()
	return mint(t, signer, approvedOp(key), at, &approval.ReceiptHTTP{Method: s.method, URL: g.URL + s.path,
		BodySHA256: receipt.BodySHA256([]byte(s.body)), IfMatch: s.ifMatch})
}

func TestMiddlewareAcceptsTheApprovedWriteOnce(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	g := newGuardedTarget(t, s.Keys(), nil)
	w := sent{method: "PATCH", path: "/events/7?notify=1", body: `{"title":"Retro"}`, ifMatch: `"v3"`}
	w.token = g.receiptFor(t, s, opKey, w, t0)

	if st, body := g.send(t, w); st != 200 {
		t.Fatalf("approved write: %d %s", st, body)
	}
	if got := g.handled(); len(got) != 1 || got[0] != `PATCH {"title":"Retro"}` {
		t.Fatalf("the handler saw %q", got)
	}
	if g.jtis[0] != opKey {
		t.Errorf("claims in context: %v", g.jtis)
	}
	st, body := g.send(t, w)
	if st != 401 || !strings.Contains(body, "replayed") {
		t.Fatalf("second delivery: %d %s", st, body)
	}
	if len(g.handled()) != 1 {
		t.Fatal("a replay reached the handler")
	}
	// Reads need no receipt (countersign reads state with GET).
	if st, _ := g.send(t, sent{method: "GET", path: "/events/7"}); st != 200 {
		t.Errorf("GET: %d", st)
	}
}

func TestMiddlewareRefuses(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	stranger := newSigner(t, seedKey(t, "k1", 9))
	g := newGuardedTarget(t, s.Keys(), nil)
	w := sent{method: "PATCH", path: "/events/7", body: `{"title":"Retro"}`}
	other := sent{method: "PATCH", path: "/events/8", body: `{"title":"Other"}`}
	withToken := func(s sent, tok string) sent { s.token = tok; return s }
	good := func() string { return g.receiptFor(t, s, opKey, w, t0) }

	cases := []struct {
		name   string
		req    sent
		status int
		reason string
	}{
		{"no receipt", w, 401, "missing"},
		{"a receipt for another operation", withToken(w, g.receiptFor(t, s, "op_bbbbbbbbbbbbbbbbbbbbbbbbbb", other, t0)), 401, "not_covered"},
		{"a modified body", withToken(sent{method: "PATCH", path: "/events/7", body: `{"title":"Fired"}`}, good()), 401, "not_covered"},
		{"another method", withToken(sent{method: "DELETE", path: "/events/7", body: `{"title":"Retro"}`}, good()), 401, "not_covered"},
		{"an If-Match the receipt lacks", withToken(sent{method: "PATCH", path: "/events/7", body: `{"title":"Retro"}`, ifMatch: `"x"`}, good()), 401, "not_covered"},
		{"an expired receipt", withToken(w, g.receiptFor(t, s, opKey, w, t0.Add(-6*time.Minute))), 401, "expired"},
		{"signed by an unknown key", withToken(w, g.receiptFor(t, stranger, opKey, w, t0)), 401, "bad_signature"},
		{"signed by an unpublished kid", withToken(w, g.receiptFor(t, newSigner(t, seedKey(t, "k2", 1)), opKey, w, t0)), 401, "unknown_key"},
		{"for another audience", withToken(w, func() string {
			c := approval.NewCountersigner(s, "https://countersign.example", approvedOp(opKey), func() time.Time { return t0 })
			tok, _ := c.Mint(approval.ReceiptRequest{Audience: "billing", HTTP: &approval.ReceiptHTTP{Method: w.method, URL: g.URL + w.path, BodySHA256: receipt.BodySHA256([]byte(w.body))}})
			return tok
		}()), 401, "wrong_audience"},
		{"from another issuer", withToken(w, func() string {
			c := approval.NewCountersigner(s, "https://other.example", approvedOp(opKey), func() time.Time { return t0 })
			tok, _ := c.Mint(approval.ReceiptRequest{Audience: "calendar", HTTP: &approval.ReceiptHTTP{Method: w.method, URL: g.URL + w.path, BodySHA256: receipt.BodySHA256([]byte(w.body))}})
			return tok
		}()), 401, "wrong_issuer"},
		{"garbage", withToken(w, "eyJhbGciOiJub25lIn0.e30."), 401, "malformed"},
		{"a body over the limit", withToken(sent{method: "PATCH", path: "/events/7", body: strings.Repeat("x", 2<<10)}, good()), 413, "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, body := g.send(t, tc.req)
			if st != tc.status || !strings.Contains(body, tc.reason) {
				t.Fatalf("got %d %q, want %d with %q", st, body, tc.status, tc.reason)
			}
			if tc.req.token != "" && strings.Contains(body, tc.req.token) {
				t.Errorf("the answer repeats the receipt")
			}
		})
	}
	if got := g.handled(); len(got) != 0 {
		t.Fatalf("refused writes reached the handler: %q", got)
	}
	// None of the refusals spent the receipt: the approved write still goes through.
	if st, body := g.send(t, withToken(w, good())); st != 200 {
		t.Fatalf("the approved write after the refusals: %d %s", st, body)
	}
}

// TestMiddlewareExpiryFollowsItsClock: the same receipt is accepted
// within its five minutes (and the leeway) and refused after, by the
// target's injected clock.
func TestMiddlewareExpiryFollowsItsClock(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	g := newGuardedTarget(t, s.Keys(), nil)
	w := sent{method: "POST", path: "/invoices", body: `{"amount":5}`}
	w.token = g.receiptFor(t, s, opKey, w, t0)
	g.setClock(t0.Add(5*time.Minute + receipt.DefaultLeeway + time.Second))
	if st, body := g.send(t, w); st != 401 || !strings.Contains(body, "expired") {
		t.Fatalf("late: %d %s", st, body)
	}
	g.setClock(t0.Add(4 * time.Minute))
	if st, body := g.send(t, w); st != 200 {
		t.Fatalf("in time: %d %s", st, body)
	}
}

// TestMiddlewareConcurrentReplays: of many simultaneous deliveries of one
// request, exactly one reaches the handler.
func TestMiddlewareConcurrentReplays(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	g := newGuardedTarget(t, s.Keys(), nil)
	w := sent{method: "DELETE", path: "/events/7"}
	w.token = g.receiptFor(t, s, opKey, w, t0)
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, _ := g.send(t, w); st == 200 {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || len(g.handled()) != 1 {
		t.Fatalf("%d accepted, %d handled", ok.Load(), len(g.handled()))
	}
}

// TestMiddlewareBehindAProxy: with BaseURL, the URL checked is the one
// countersign wrote to, not the address the proxy forwards to.
func TestMiddlewareBehindAProxy(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	g := newGuardedTarget(t, s.Keys(), func(c *receipt.Config) { c.BaseURL = "https://calendar.example/api/" })
	w := sent{method: "PATCH", path: "/events/a%2Fb", body: `{}`}
	w.token = mint(t, s, approvedOp(opKey), t0, &approval.ReceiptHTTP{Method: "PATCH", URL: "https://calendar.example/api/events/a%2Fb", BodySHA256: receipt.BodySHA256([]byte("{}"))})
	if st, body := g.send(t, w); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
}

type failingCache struct{}

func (failingCache) Use(context.Context, string, time.Time) (bool, error) {
	return false, fmt.Errorf("redis down")
}

func TestMiddlewareFailsClosed(t *testing.T) {
	s := newSigner(t, seedKey(t, "k1", 1))
	g := newGuardedTarget(t, s.Keys(), func(c *receipt.Config) { c.Replay = failingCache{} })
	w := sent{method: "POST", path: "/x"}
	w.token = g.receiptFor(t, s, opKey, w, t0)
	st, body := g.send(t, w)
	if st != 503 || strings.Contains(body, "redis down") {
		t.Fatalf("%d %q", st, body)
	}
	if len(g.handled()) != 0 {
		t.Fatal("reached the handler without a replay check")
	}
	if _, err := receipt.Middleware(receipt.Config{Audience: "x"}); err == nil {
		t.Error("no keys accepted")
	}
	if _, err := receipt.Middleware(receipt.Config{Keys: s.Keys()}); err == nil {
		t.Error("no audience accepted")
	}
}
