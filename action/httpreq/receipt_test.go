package httpreq_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

// guarded puts the fake target behind receipt.Middleware, and keeps the
// headers of every write that arrived (before the middleware judged it).
type guarded struct {
	*fakeTarget
	srv *httptest.Server
	mu  sync.Mutex
	hdr []http.Header
}

func newGuarded(t *testing.T, keys receipt.KeySource) *guarded {
	t.Helper()
	g := &guarded{fakeTarget: newFakeTarget(t, true)}
	mw, err := receipt.Middleware(receipt.Config{Keys: keys, Audience: "calendar", Issuer: "https://cs.example"})
	if err != nil {
		t.Fatal(err)
	}
	inner := mw(http.HandlerFunc(g.serve))
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			g.mu.Lock()
			g.hdr = append(g.hdr, r.Header.Clone())
			g.mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *guarded) target() httpreq.Target {
	t := calendarTarget(g.fakeTarget)
	t.BaseURL = g.srv.URL + "/api"
	return t
}

func executing(op *approval.Operation, s approval.ReceiptSigner) context.Context {
	op.PayloadHash = "sha256:" + strings.Repeat("0", 64)
	op.Route = approval.Route{Required: 1}
	op.Approvals = []approval.Decision{{Approver: "grace", Via: "email", At: time.Now().Add(-time.Minute)}}
	return approval.WithCountersigner(bg, approval.NewCountersigner(s, "https://cs.example", op, time.Now))
}

// TestExecuteCarriesAReceiptTheTargetVerifies: the write carries the
// receipt of exactly itself (method, URL with query, body, If-Match from
// the re-read), a target with the middleware accepts it once, and refuses
// a write that comes without one.
func TestExecuteCarriesAReceiptTheTargetVerifies(t *testing.T) {
	k, _ := receipt.GenerateKey()
	signer, _ := receipt.NewSigner(k)
	g := newGuarded(t, signer.Keys())
	g.put(eventPath, event())
	a := newAction(t, g.target())

	p := prepare(t, a, `{"target":"calendar","method":"PATCH","path":"/events/42","query":{"notify":"none"},"body":{"title":"Retro"}}`)
	op := opOf(t, p)
	if _, err := a.Execute(executing(op, signer), op); err != nil {
		t.Fatalf("execute: %v", err)
	}
	w := g.writes()
	if len(w) != 1 || w[0].Body != `{"title":"Retro"}` {
		t.Fatalf("writes that passed the middleware: %+v", w)
	}
	tok := g.hdr[0].Get(httpreq.ReceiptHeader)
	c, err := receipt.Verify(bg, tok, signer.Keys(), receipt.Expect{Audience: "calendar"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != op.Key || c.HTTP.Method != "PATCH" || c.HTTP.URL != g.srv.URL+"/api/events/42?notify=none" ||
		c.HTTP.IfMatch != p.State.ETag || c.HTTP.BodySHA256 != receipt.BodySHA256([]byte(`{"title":"Retro"}`)) {
		t.Fatalf("claims = %+v %+v", c, c.HTTP)
	}

	// The same write delivered again (a replay of the recorded request).
	req, _ := http.NewRequest("PATCH", g.srv.URL+"/api/events/42?notify=none", strings.NewReader(`{"title":"Retro"}`))
	req.Header = g.hdr[0].Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || len(g.writes()) != 1 {
		t.Fatalf("replay: %d, %d writes", resp.StatusCode, len(g.writes()))
	}

	// An execution without a countersigner sends no receipt: refused.
	p2 := prepare(t, a, `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"Planning"}}`)
	op2 := opOf(t, p2)
	_, err = a.Execute(bg, op2)
	if ee := execErr(t, err); ee.Details["status"] != 401 {
		t.Fatalf("without a receipt: %+v", ee)
	}
	if len(g.writes()) != 1 {
		t.Fatal("a write without a receipt got through")
	}
}

func TestTargetCannotSetTheReceiptHeader(t *testing.T) {
	tg := calendarTarget(newFakeTarget(t, false))
	tg.Headers = map[string]string{"countersign-receipt": "forged"}
	if _, err := httpreq.New([]httpreq.Target{tg}); err == nil || !strings.Contains(err.Error(), "set by countersign") {
		t.Fatalf("err = %v", err)
	}
}
