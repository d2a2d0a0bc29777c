package testkit

import (
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// The leak scan must be able to fail: each part of a real link is found
// wherever it hides, except in the console notice of a log.
func TestFindLinkSecrets(t *testing.T) {
	k := approval.RandomKeyring()
	c := approval.NewLinkClaims("op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "grace", "email", time.Now().Add(time.Hour))
	link := "https://approvals.example/a/" + k.Sign(c, "sha256:00")
	secrets := LinkSecrets(link)
	if len(secrets) != 5 {
		t.Fatalf("secrets %q: want token, claims, signature, nonce, nonce hash", secrets)
	}
	for i, s := range secrets {
		texts := map[string]string{"responses": `{"next_step":"…` + s + `…"}`}
		if got := FindLinkSecrets(secrets, texts); len(got) == 0 {
			t.Errorf("secret %d not found in a response", i)
		}
	}
	notice := "  Review and decide: " + link
	if got := FindLinkSecrets(secrets, map[string]string{"log": notice}); len(got) != 0 {
		t.Errorf("the console notice in a log was reported: %v", got)
	}
	if got := FindLinkSecrets(secrets, map[string]string{"responses": notice}); len(got) == 0 {
		t.Error("a console-style line in an agent response was excused")
	}
}
