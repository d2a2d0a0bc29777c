package approval_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

const key32 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func TestLinkSignVerifyRotate(t *testing.T) {
	old, err := approval.ParseKeyring("k1:" + key32)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := approval.ParseKeyring("k2:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("z", 32))) + ",k1:" + key32)
	if err != nil {
		t.Fatal(err)
	}
	c := approval.NewLinkClaims("op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "grace", "email", time.Now().Add(time.Hour))
	token := old.Sign(c, "sha256:aa")
	if err := rotated.VerifyLink(token, "sha256:aa"); err != nil {
		t.Fatalf("a link signed with the old key must verify after rotation: %v", err)
	}
	if err := old.VerifyLink(rotated.Sign(c, "sha256:aa"), "sha256:aa"); err == nil {
		t.Fatal("a key the ring does not hold verified")
	}
	if err := old.VerifyLink(token, "sha256:bb"); err == nil {
		t.Fatal("a link verified against another payload hash")
	}
	got, err := old.ParseLink(token)
	if err != nil || got.Operation != c.Operation || got.Approver != "grace" || got.Nonce != c.Nonce || !got.Expires.Equal(c.Expires) {
		t.Fatalf("parse: %+v %v", got, err)
	}
	if len(c.Nonce) < 22 { // 128 bits in base64url
		t.Fatalf("nonce %q is short", c.Nonce)
	}

	// Each signature has exactly one accepted spelling: base64 leaves a few
	// bits unused in the last character, and setting them is tampering.
	parts := strings.Split(token, ".")
	last := parts[2][len(parts[2])-1]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, last)
	alt := alphabet[(i&^3)|((i+1)&3)] // same high bits, different unused low bits
	tampered := parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1] + string(alt)
	if err := old.VerifyLink(tampered, "sha256:aa"); err == nil {
		t.Fatal("a non-canonical encoding of the signature verified")
	}
}

func TestParseKeyringRefusesWeakKeys(t *testing.T) {
	for name, s := range map[string]string{
		"empty":        "",
		"no kid":       key32,
		"short key":    "k1:" + base64.StdEncoding.EncodeToString([]byte("short")),
		"bad base64":   "k1:!!!",
		"duplicate id": "k1:" + key32 + ",k1:" + key32,
		"bad kid":      "k 1:" + key32,
	} {
		if _, err := approval.ParseKeyring(s); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), key32[:8]) {
			t.Errorf("%s: error shows the key: %v", name, err)
		}
	}
}
