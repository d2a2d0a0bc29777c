package passkey_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/webauthntest"
	"github.com/countersign/countersign/passkey"
)

const origin = "https://approvals.example.com"

var grace = &approval.Approver{ID: "grace", Name: "Grace Park"}

func enrolled(t *testing.T) (*passkey.RP, *webauthntest.Authenticator, []approval.PasskeyCredential) {
	t.Helper()
	rp, err := passkey.New(origin)
	if err != nil {
		t.Fatal(err)
	}
	auth := webauthntest.New("approvals.example.com", origin)
	ch := []byte("an-enrolment-challenge-of-32-byte")
	c, err := rp.Register(grace, ch, nil, auth.Create(passkey.UserHandle("grace"), ch))
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	return rp, auth, []approval.PasskeyCredential{c}
}

func code(err error) string {
	var se *approval.StepUpError
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}

func TestRegisterAndCheck(t *testing.T) {
	rp, auth, creds := enrolled(t)
	if len(creds[0].PublicKey) == 0 || string(creds[0].ID) != string(auth.ID) {
		t.Fatalf("credential = %+v", creds[0])
	}
	ch := approval.DecisionChallenge("op_x", "sha256:aa", true, "grace")
	use, err := rp.Check(grace, ch, creds, auth.Get(ch))
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if use.SignCount != 1 || string(use.CredentialID) != string(auth.ID) {
		t.Errorf("use = %+v", use)
	}
}

// An assertion is bound to its call: another operation, payload hash,
// decision or approver has another challenge and is refused.
func TestCheckRefusesAnotherCall(t *testing.T) {
	rp, auth, creds := enrolled(t)
	signed := auth.Get(approval.DecisionChallenge("op_x", "sha256:aa", true, "grace"))
	for name, ch := range map[string][]byte{
		"another operation": approval.DecisionChallenge("op_y", "sha256:aa", true, "grace"),
		"another payload":   approval.DecisionChallenge("op_x", "sha256:bb", true, "grace"),
		"another decision":  approval.DecisionChallenge("op_x", "sha256:aa", false, "grace"),
		"another approver":  approval.DecisionChallenge("op_x", "sha256:aa", true, "ada"),
	} {
		if _, err := rp.Check(grace, ch, creds, signed); code(err) != "challenge" {
			t.Errorf("%s: err = %v, want a challenge refusal", name, err)
		}
	}
}

func TestCheckRefusals(t *testing.T) {
	rp, auth, creds := enrolled(t)
	ch := approval.DecisionChallenge("op_x", "sha256:aa", true, "grace")

	other := webauthntest.New("approvals.example.com", origin)
	other.Create(passkey.UserHandle("grace"), ch)
	if _, err := rp.Check(grace, ch, creds, other.Get(ch)); code(err) != "unknown_credential" {
		t.Errorf("another passkey: %v", err)
	}
	auth.NoUV = true
	if _, err := rp.Check(grace, ch, creds, auth.Get(ch)); code(err) != "user_verification" {
		t.Errorf("no user verification: %v", err)
	}
	auth.NoUV = false
	phish := webauthntest.New("approvals.example.com", "https://evil.example")
	phish.ID, phish.Count = auth.ID, 10
	// Same credential id, other key and origin: the signature fails.
	if _, err := rp.Check(grace, ch, creds, phish.Get(ch)); code(err) != "invalid" {
		t.Errorf("other origin and key: %v", err)
	}
	bad := auth.Get(ch)
	var m map[string]any
	_ = json.Unmarshal(bad, &m)
	m["response"].(map[string]any)["signature"] = "AAAA"
	bad, _ = json.Marshal(m)
	if _, err := rp.Check(grace, ch, creds, bad); code(err) != "invalid" {
		t.Errorf("bad signature: %v", err)
	}
	if _, err := rp.Check(grace, ch, creds, []byte(`{"nope":1}`)); code(err) != "invalid" {
		t.Errorf("garbage: %v", err)
	}
}

func TestRegisterRefusals(t *testing.T) {
	rp, err := passkey.New(origin)
	if err != nil {
		t.Fatal(err)
	}
	ch := []byte("an-enrolment-challenge-of-32-byte")
	auth := webauthntest.New("approvals.example.com", origin)
	if _, err := rp.Register(grace, []byte("another-enrolment-challenge-32by"), nil, auth.Create(passkey.UserHandle("grace"), ch)); code(err) != "challenge" {
		t.Errorf("other challenge: %v", err)
	}
	auth.NoUV = true
	if _, err := rp.Register(grace, ch, nil, auth.Create(passkey.UserHandle("grace"), ch)); code(err) != "user_verification" {
		t.Errorf("no UV: %v", err)
	}
	wrongRP := webauthntest.New("evil.example", origin)
	if _, err := rp.Register(grace, ch, nil, wrongRP.Create(passkey.UserHandle("grace"), ch)); code(err) != "invalid" {
		t.Errorf("other RP: %v", err)
	}
}

func TestNeedsADomain(t *testing.T) {
	for _, u := range []string{"http://10.0.0.1:8080", "https://10.0.0.1", "http://approvals.example.com"} {
		if _, err := passkey.New(u); err == nil {
			t.Errorf("New(%s) accepted", u)
		}
	}
	for u, origin := range map[string]string{"http://localhost:8080": "http://localhost:8080", "http://127.0.0.1:8080": "http://localhost:8080",
		"https://approvals.example.com": "https://approvals.example.com"} {
		rp, err := passkey.New(u)
		if err != nil || rp.Origin() != origin {
			t.Errorf("New(%s) = %v, %v; want origin %s", u, rp, err, origin)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	rp, _ := passkey.New(origin)
	auth := webauthntest.New("approvals.example.com", origin)
	ch := []byte("an-enrolment-challenge-of-32-byte")
	c, err := rp.Register(grace, ch, nil, auth.Create(passkey.UserHandle("grace"), ch))
	if err != nil {
		b.Fatal(err)
	}
	dc := approval.DecisionChallenge("op_x", "sha256:aa", true, "grace")
	raw := auth.Get(dc)
	b.ResetTimer()
	for range b.N {
		if _, err := rp.Check(grace, dc, []approval.PasskeyCredential{c}, raw); err != nil {
			b.Fatal(err)
		}
	}
}
