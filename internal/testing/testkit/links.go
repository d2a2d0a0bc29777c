package testkit

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
)

// LinkSecrets returns what would let someone approve, for a link (a URL
// with /a/ or a bare token): the token, its claims and signature segments,
// the raw nonce and the nonce's stored hash.
func LinkSecrets(link string) []string {
	tok := link
	if _, after, ok := strings.Cut(link, "/a/"); ok {
		tok = after
	}
	out := []string{tok}
	if parts := strings.Split(tok, "."); len(parts) == 3 {
		out = append(out, parts[1], parts[2])
		if raw, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			if f := strings.Split(string(raw), "|"); len(f) == 5 {
				out = append(out, f[4], approval.NonceHash(f[4]))
			}
		}
	}
	return out
}

// AssertNoLinkSecrets fails if any secret appears in any of texts (named
// for the message). In texts whose name starts with "log", the console
// channel's deliberate notice line ("Review and decide: …") is the one
// place a link may appear.
func AssertNoLinkSecrets(t testing.TB, secrets []string, texts map[string]string) {
	t.Helper()
	if len(secrets) == 0 {
		t.Fatal("no link was issued: the scan would prove nothing")
	}
	for name, text := range texts {
		if strings.TrimSpace(text) == "" {
			t.Errorf("%s is empty: the scan would prove nothing", name)
		}
	}
	for _, f := range FindLinkSecrets(secrets, texts) {
		t.Error(f)
	}
}

// FindLinkSecrets lists where secrets appear in texts, as AssertNoLinkSecrets
// reads them.
func FindLinkSecrets(secrets []string, texts map[string]string) []string {
	var found []string
	for name, text := range texts {
		for i, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(name, "log") && strings.Contains(line, "Review and decide: ") {
				continue
			}
			for _, s := range secrets {
				if strings.Contains(line, s) {
					found = append(found, fmt.Sprintf("%s line %d carries link material %q", name, i+1, s))
				}
			}
		}
	}
	return found
}
