package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

// TestExampleTarget: the example accepts a write with its receipt once,
// and refuses it without one.
func TestExampleTarget(t *testing.T) {
	k, _ := receipt.GenerateKey()
	signer, _ := receipt.NewSigner(k)
	h, err := newHandler(signer.Keys(), "calendar", "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := `{"title":"Retro"}`
	op := &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: "http.request", PayloadHash: "sha256:00",
		Route: approval.Route{Required: 1}, Approvals: []approval.Decision{{Approver: "grace", Via: "email", At: time.Now()}}}
	tok, err := approval.NewCountersigner(signer, "http://countersign.test", op, time.Now).Mint(approval.ReceiptRequest{Audience: "calendar",
		HTTP: &approval.ReceiptHTTP{Method: "PATCH", URL: srv.URL + "/events/1", BodySHA256: receipt.BodySHA256([]byte(body))}})
	if err != nil {
		t.Fatal(err)
	}
	send := func(tok string) int {
		req, _ := http.NewRequest("PATCH", srv.URL+"/events/1", strings.NewReader(body))
		if tok != "" {
			req.Header.Set(receipt.Header, tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send(""); got != 401 {
		t.Errorf("without a receipt: %d", got)
	}
	if got := send(tok); got != 200 {
		t.Errorf("with its receipt: %d", got)
	}
	if got := send(tok); got != 401 {
		t.Errorf("again: %d", got)
	}
}
