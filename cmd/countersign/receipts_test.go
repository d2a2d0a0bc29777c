package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

func TestParseReceiptKeys(t *testing.T) {
	s, err := parseReceiptKeys("2026-06:" + seedK2 + " , 2026-01:" + strings.TrimRight(seedK1, "="))
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := receipt.ParseJWKS(s.JWKS())
	if s.KeyID() != "2026-06" || strings.Join(keys.IDs(), ",") != "2026-06,2026-01" {
		t.Fatalf("signs with %s, publishes %v", s.KeyID(), keys.IDs())
	}
	short := "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEB" // 30 bytes
	for spec, want := range map[string]string{
		"k1:" + seedK1 + ",":             "entry 2 is empty",
		seedK1:                           "entry 1 is not kid:base64seed",
		"bad kid:" + seedK1:              "entry 1: the kid must be",
		"k1:not*base64":                  `key "k1": the seed is not base64`,
		"k1:" + short:                    `key "k1": the seed must be 32 bytes, not 30`,
		"k1:" + seedK1 + ",k1:" + seedK2: "used twice",
	} {
		_, err := parseReceiptKeys(spec)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "COUNTERSIGN_RECEIPT_KEYS: ") {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
		for _, secret := range []string{seedK1, seedK2, short, "not*base64"} {
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("%q: the error shows the seed: %v", spec, err)
			}
		}
	}
	// A bad key stops the start, with the same clear error.
	err = (&Main{Env: func(k string) (string, bool) {
		v, ok := map[string]string{"COUNTERSIGN_LISTEN": "127.0.0.1:0", "COUNTERSIGN_RECEIPT_KEYS": "k1:" + short}[k]
		return v, ok
	}, Stderr: &bytes.Buffer{}}).openAndClose()
	if err == nil || !strings.Contains(err.Error(), "COUNTERSIGN_RECEIPT_KEYS") {
		t.Errorf("start with a bad key: %v", err)
	}
}

func (m *Main) openAndClose() error {
	err := m.Open(context.Background())
	_ = m.Close()
	return err
}

// TestVerifyCommand drives `countersign verify` with a JWKS file: flags
// before or after the receipt, the receipt from stdin, expiry as of --at,
// and exit codes.
func TestVerifyCommand(t *testing.T) {
	signer, err := parseReceiptKeys("k1:" + seedK1)
	must(t, err)
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	must(t, os.WriteFile(jwks, signer.JWKS(), 0o600))
	body := filepath.Join(dir, "body")
	must(t, os.WriteFile(body, []byte(`{"amount":5}`), 0o600))
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	op := &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: "http.request", PayloadHash: "sha256:00",
		Route: approval.Route{Required: 1}, Approvals: []approval.Decision{{Approver: "grace", Via: "email", At: at}}}
	tok, err := approval.NewCountersigner(signer, "https://cs.example", op, func() time.Time { return at }).Mint(approval.ReceiptRequest{
		Audience: "billing", HTTP: &approval.ReceiptHTTP{Method: "POST", URL: "https://billing.example/invoices", BodySHA256: receipt.BodySHA256([]byte(`{"amount":5}`))}})
	must(t, err)
	when := "--at=" + at.Add(time.Minute).Format(time.RFC3339)

	cases := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  []string
	}{
		{"valid, flags after the receipt", []string{tok, "--jwks", jwks, when}, "", 0,
			[]string{"claims (verified; kid k1)", `"jti": "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"`, "receipt: valid (signed by key k1"}},
		{"from stdin, covering", []string{"--jwks", jwks, when, "--method", "post", "--url", "https://billing.example/invoices", "--body", body, "--aud", "billing"},
			tok + "\n", 0, []string{"covers POST https://billing.example/invoices: yes"}},
		{"another URL", []string{"-", "--jwks", jwks, when, "--method", "POST", "--url", "https://billing.example/refunds"}, tok, 1,
			[]string{"receipt: valid", "covers POST https://billing.example/refunds: NO: receipt not_covered"}},
		{"expired now", []string{tok, "--jwks", jwks}, "", 1, []string{"claims (verified", "receipt: REFUSED: receipt expired"}},
		{"another audience", []string{tok, "--jwks", jwks, when, "--aud", "calendar"}, "", 1, []string{"REFUSED: receipt wrong_audience"}},
		{"edited", []string{tok[:len(tok)-4] + "AAAA", "--jwks", jwks, when}, "", 1,
			[]string{"claims (NOT VERIFIED: do not trust them", "REFUSED: receipt bad_signature"}},
		{"pasted email header, name and folding included", []string{"-", "--jwks", jwks, when}, "Countersign-Receipt: " + tok[:40] + "\r\n " + tok[40:] + "\r\n", 0,
			[]string{"receipt: valid (signed by key k1"}},
		{"pasted header as the argument", []string{"countersign-receipt:" + tok, "--jwks", jwks, when}, "", 0,
			[]string{"receipt: valid (signed by key k1"}},
		{"no jwks", []string{tok}, "", 2, nil},
		{"method without url", []string{tok, "--jwks", jwks, "--method", "POST"}, "", 2, nil},
		{"help", []string{"--help"}, "", 0, []string{"countersign verify [RECEIPT|-]", "--jwks"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"verify"}, tc.args...), strings.NewReader(tc.stdin), &out, &errOut, noEnv)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out.String(), errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			// The verdict is printed once, on stdout.
			if tc.code == 1 && errOut.Len() != 0 {
				t.Errorf("a refusal printed again on stderr: %q", errOut.String())
			}
			if n := strings.Count(out.String(), "REFUSED") + strings.Count(out.String(), ": NO:"); tc.code == 1 && n != 1 {
				t.Errorf("%d verdicts, want 1:\n%s", n, out.String())
			}
		})
	}
}
