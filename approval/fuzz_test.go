package approval_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// FuzzCanonical: canonical JSON is a fixed point (Canonical(Canonical(x))
// == Canonical(x)), and the payload hash of a value does not depend on how
// its JSON was spelled (whitespace, key order, escapes, number forms).
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x"]}`, `{"a":1e3,"b":0.1,"c":-0,"d":100000000000000000000}`,
		`"\u00e9\ud83d\ude00\u2028"`, `[{"z":{},"y":[]},"<&>"]`, `{"amount":"5,000","to":["ada@client.example"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if approval.CheckJSONDepth(raw, "") != nil || !json.Valid(raw) {
			return
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return
		}
		c1, err := approval.Canonical(json.RawMessage(raw))
		if err != nil {
			return // not representable (e.g. a number out of range): refused, fine
		}
		c2, err := approval.Canonical(json.RawMessage(c1))
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("not idempotent:\n%s\n%s (%v)", c1, c2, err)
		}
		// Re-encoded by another encoder (Go's map order, escapes, indent).
		re, _ := json.MarshalIndent(v, "", "\t")
		c3, err := approval.Canonical(json.RawMessage(re))
		if err != nil || !bytes.Equal(c1, c3) {
			t.Fatalf("re-encoding changed the canonical form:\n%s\n%s (%v)", c1, c3, err)
		}
		h1, err1 := approval.PayloadHash("http.request", c1, "agent")
		h2, err2 := approval.PayloadHash("http.request", json.RawMessage(re), "agent")
		if err1 != nil || err2 != nil || h1 != h2 {
			t.Fatalf("hash %s vs %s (%v %v)", h1, h2, err1, err2)
		}
	})
}

// FuzzLink: decoding any token never panics; a token that verifies has one
// spelling (the one Sign produced); any change to a signed token makes it
// fail to verify.
func FuzzLink(f *testing.F) {
	k, err := approval.ParseKeyring("k1:" + key32)
	if err != nil {
		f.Fatal(err)
	}
	c := approval.NewLinkClaims("op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "grace", "email", time.Unix(1900000000, 0))
	good := k.Sign(c, "sha256:aa")
	f.Add(good, 0, byte(0))
	f.Add(good, 10, byte('A'))
	f.Add(good, len(good)-1, byte('B'))
	f.Add("k1.b3BfYWFh.c2ln", 0, byte(0))
	f.Add("", 0, byte(0))
	f.Fuzz(func(t *testing.T, token string, at int, b byte) {
		if _, err := k.ParseLink(token); err == nil {
			_ = k.VerifyLink(token, "sha256:aa")
		}
		if k.VerifyLink(token, "sha256:aa") == nil && token != good {
			// Only what Sign made verifies: another token for the same
			// claims would be a second spelling of one signature.
			cl, err := k.ParseLink(token)
			if err != nil {
				t.Fatalf("a token that does not parse verified: %q", token)
			}
			if k.Sign(cl, "sha256:aa") != token {
				t.Fatalf("a second spelling verified: %q (Sign gives %q)", token, k.Sign(cl, "sha256:aa"))
			}
		}
		// Tamper with the good token at one byte.
		if at < 0 || len(good) == 0 {
			return
		}
		i := at % len(good)
		if good[i] == b {
			return
		}
		tampered := good[:i] + string([]byte{b}) + good[i+1:]
		if k.VerifyLink(tampered, "sha256:aa") == nil {
			t.Fatalf("tampered at %d (%q→%q) and still verifies: %q", i, good[i], b, tampered)
		}
		if strings.Contains(tampered, "..") {
			return
		}
	})
}
