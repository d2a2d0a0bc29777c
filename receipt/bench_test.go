package receipt_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

// BenchmarkSignPerExecution is what one execution pays for its receipt:
// building the claims from the operation and signing them.
func BenchmarkSignPerExecution(b *testing.B) {
	s := newSigner(b, seedKey(b, "k1", 1))
	op := approvedOp(opKey)
	h := patch(`{"title":"Retro"}`)
	now := func() time.Time { return t0 }
	b.ReportAllocs()
	for b.Loop() {
		c := approval.NewCountersigner(s, "https://countersign.example", op, now)
		if _, err := c.Mint(approval.ReceiptRequest{Audience: "calendar", HTTP: h}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify is receipt.Verify alone: parse, signature, claims.
func BenchmarkVerify(b *testing.B) {
	s := newSigner(b, seedKey(b, "k1", 1))
	tok := mint(b, s, approvedOp(opKey), t0, patch(`{"title":"Retro"}`))
	keys := s.Keys()
	ctx := context.Background()
	expect := receipt.Expect{Audience: "calendar", Now: t0}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := receipt.Verify(ctx, tok, keys, expect); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMiddlewarePerRequest is what a target pays per write: the
// middleware's whole check (signature, claims, body hash, replay cache)
// in front of a handler that does nothing, without a network.
func BenchmarkMiddlewarePerRequest(b *testing.B) {
	s := newSigner(b, seedKey(b, "k1", 1))
	now := t0
	mw, err := receipt.Middleware(receipt.Config{Keys: s.Keys(), Audience: "calendar", Now: func() time.Time { return now },
		Replay: receipt.NewMemoryReplayCache(1<<22, func() time.Time { return now })})
	if err != nil {
		b.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	body := `{"title":"Retro","description":"` + strings.Repeat("x", 1000) + `"}`
	hc := &approval.ReceiptHTTP{Method: "PATCH", URL: "http://calendar.example/api/events/7", BodySHA256: receipt.BodySHA256([]byte(body))}
	// Every request needs its own receipt (each is accepted once): mint
	// them first, outside the timer.
	toks := make([]string, 0, 1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%1024 == 0 {
			b.StopTimer()
			toks = toks[:0]
			for j := range 1024 {
				c := approval.NewCountersigner(s, "https://countersign.example", approvedOp(opKey), func() time.Time { return t0 })
				tok, err := c.Mint(approval.ReceiptRequest{Audience: "calendar", HTTP: hc, Item: itoa(i + j)})
				if err != nil {
					b.Fatal(err)
				}
				toks = append(toks, tok)
			}
			b.StartTimer()
		}
		req := httptest.NewRequest("PATCH", "http://calendar.example/api/events/7", strings.NewReader(body))
		req.Header.Set(receipt.Header, toks[i%1024])
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		i++
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
