package receipt_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

// TestInteropWithJoseNPM verifies a receipt with a JOSE implementation that
// is not ours: the jose npm package (testdata/jose/verify.mjs), run with
// node. jose must accept the receipt against our JWKS and read the claims
// we wrote, refuse an edited one and an expired one; and a receipt jose
// signs with one of our keys must pass receipt.Verify.
//
// It runs only where node is installed and jose has been fetched:
//
//	(cd receipt/testdata/jose && npm ci) && go test -run TestInteropWithJoseNPM ./receipt
func TestInteropWithJoseNPM(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir, _ := filepath.Abs("testdata/jose")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "jose")); err != nil {
		t.Skip("jose is not installed: run npm ci in receipt/testdata/jose")
	}
	k := seedKey(t, "2026-12", 5)
	s := newSigner(t, k, seedKey(t, "2026-06", 6))
	now := time.Now().Truncate(time.Second)
	tok := mint(t, s, approvedOp(opKey), now, patch(`{"title":"Retro"}`))
	parts := strings.Split(tok, ".")
	var claims map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	must(t, json.Unmarshal(raw, &claims))
	claims["aud"] = "billing" // an edit the signature no longer covers
	edited, _ := json.Marshal(claims)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(edited) + "." + parts[2]

	// What jose will sign: a receipt of our shape, for another operation.
	back := approval.ReceiptClaims{Issuer: "https://countersign.example", ID: "op_cccccccccccccccccccccccccc",
		IssuedAt: now.Unix(), Expires: now.Add(5 * time.Minute).Unix(), Audience: "calendar", Action: "http.request",
		PayloadHash: "sha256:" + strings.Repeat("cd", 32), Approvals: []approval.ReceiptApproval{{Subject: "grace", Via: "email", At: now.UTC()}}, Required: 1}
	priv := map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": k.ID,
		"x": base64.RawURLEncoding.EncodeToString(k.Private.Public().(ed25519.PublicKey)),
		"d": base64.RawURLEncoding.EncodeToString(k.Private.Seed())}
	in, _ := json.Marshal(map[string]any{
		"jwks": json.RawMessage(s.JWKS()), "token": tok, "tampered": tampered, "issuer": "https://countersign.example",
		"audience": "calendar", "now": now.Unix(), "signing_jwk": priv, "claims": back,
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "verify.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node verify.mjs: %v\n%s", err, stderr.String())
	}
	var got struct {
		Payload      map[string]any    `json:"payload"`
		Header       map[string]string `json:"header"`
		Tampered     string            `json:"tampered"`
		Expired      string            `json:"expired"`
		Signed       string            `json:"signed"`
		SignedHeader map[string]string `json:"signed_header"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("jose output %s: %v", out, err)
	}
	if got.Header["alg"] != "EdDSA" || got.Header["typ"] != receipt.Type || got.Header["kid"] != "2026-12" {
		t.Errorf("jose read the header %v", got.Header)
	}
	h := got.Payload["http"].(map[string]any)
	apr := got.Payload["apr"].([]any)
	if got.Payload["jti"] != opKey || got.Payload["aud"] != "calendar" || got.Payload["act"] != "http.request" ||
		got.Payload["req"] != float64(2) || len(apr) != 2 || apr[0].(map[string]any)["sub"] != "grace" ||
		h["body_sha256"] != receipt.BodySHA256([]byte(`{"title":"Retro"}`)) || h["if_match"] != `"v3"` {
		t.Errorf("jose read the claims %v", got.Payload)
	}
	if got.Tampered != "ERR_JWS_SIGNATURE_VERIFICATION_FAILED" {
		t.Errorf("jose on an edited receipt: %s", got.Tampered)
	}
	if got.Expired != "ERR_JWT_EXPIRED" {
		t.Errorf("jose on an expired receipt: %s", got.Expired)
	}
	c, err := receipt.Verify(context.Background(), got.Signed, s.Keys(), receipt.Expect{Audience: "calendar", Issuer: "https://countersign.example", Now: now})
	if err != nil {
		t.Fatalf("our Verify on jose's receipt (header %v): %v", got.SignedHeader, err)
	}
	if c.ID != back.ID || c.PayloadHash != back.PayloadHash || len(c.Approvals) != 1 || !c.Approvals[0].At.Equal(now) {
		t.Errorf("claims of jose's receipt: %+v", c)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestInteropWithPyJWT runs the Python verification of docs/receipts.md
// (testdata/pyjwt/verify.py) with PyJWT: it must accept the receipt and the
// request it covers, and refuse an edited body, another audience and an
// edited token. It runs where a python3 with PyJWT and cryptography is
// installed (PyPI is not reachable here: Debian's python3-jwt serves):
//
//	apt-get install python3-jwt python3-cryptography && go test -run TestInteropWithPyJWT ./receipt
func TestInteropWithPyJWT(t *testing.T) {
	python := ""
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import jwt, cryptography").Run() == nil {
			python = path
			break
		}
	}
	if python == "" {
		t.Skip("no python3 with PyJWT and cryptography")
	}
	s := newSigner(t, seedKey(t, "k1", 5), seedKey(t, "k0", 6))
	body := `{"title":"Retro"}`
	tok := mint(t, s, approvedOp(opKey), time.Now(), patch(body))
	run := func(token, audience, sentBody string) map[string]any {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"jwks": json.RawMessage(s.JWKS()), "token": token, "method": "PATCH",
			"url": patch("").URL, "body": sentBody, "audience": audience, "issuer": "https://countersign.example"})
		cmd := exec.Command(python, "verify.py")
		cmd.Dir = "testdata/pyjwt"
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python verify.py: %v\n%s", err, stderr.String())
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		return got
	}
	if got := run(tok, "calendar", body); got["claims"] == nil || got["claims"].(map[string]any)["jti"] != opKey {
		t.Fatalf("PyJWT on the receipt: %v", got)
	}
	edited := tok[:len(tok)-6] + "AAAAAA"
	for name, got := range map[string]map[string]any{
		"edited body":      run(tok, "calendar", `{"title":"Fired"}`),
		"another audience": run(tok, "billing", body),
		"edited token":     run(edited, "calendar", body),
	} {
		if got["error"] == nil {
			t.Errorf("PyJWT accepted the %s: %v", name, got)
		}
	}
}
