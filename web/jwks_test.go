package web_test

import (
	"io"
	"net/http/httptest"
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/receipt"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
)

// TestJWKSIsPublishedAndCacheable: the receipt keys are served as a JWK
// Set with a cache lifetime and an ETag that answers 304; without keys
// there is no such document.
func TestJWKSIsPublishedAndCacheable(t *testing.T) {
	k, _ := receipt.GenerateKey()
	signer, _ := receipt.NewSigner(k)
	st := store.New(redistest.Start(t).Client(t), nil)
	defer st.Close()
	svc, err := approval.NewService(approval.Config{Store: st, Policy: &approval.Policy{}, Links: approval.RandomKeyring()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{Service: svc, PublicURL: "http://countersign.test", JWKS: signer.JWKS()})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.App().Test(httptest.NewRequest("GET", "/.well-known/jwks.json", nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/jwk-set+json" ||
		resp.Header.Get("Cache-Control") != "public, max-age=300" || resp.Header.Get("ETag") == "" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	keys, err := receipt.ParseJWKS(body)
	if err != nil || len(keys.IDs()) != 1 || keys.IDs()[0] != signer.KeyID() {
		t.Fatalf("jwks %s: %v", body, err)
	}
	for _, inm := range []string{resp.Header.Get("ETag"), `"other", ` + resp.Header.Get("ETag"), "W/" + resp.Header.Get("ETag")} {
		req := httptest.NewRequest("GET", "/.well-known/jwks.json", nil)
		req.Header.Set("If-None-Match", inm)
		again, err := srv.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		if again.StatusCode != 304 {
			t.Errorf("If-None-Match %s: %d", inm, again.StatusCode)
		}
	}
	req := httptest.NewRequest("GET", "/.well-known/jwks.json", nil)
	req.Header.Set("If-None-Match", `"stale"`)
	if r, _ := srv.App().Test(req, -1); r.StatusCode != 200 {
		t.Errorf("stale ETag: %d", r.StatusCode)
	}

	bare, err := web.New(web.Config{Service: svc, PublicURL: "http://countersign.test"})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := bare.App().Test(httptest.NewRequest("GET", "/.well-known/jwks.json", nil), -1); r.StatusCode != 404 {
		t.Errorf("without keys: %d", r.StatusCode)
	}
}
