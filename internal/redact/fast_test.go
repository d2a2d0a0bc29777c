package redact

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// patternsOnly is String without its shortcuts: every pattern on every
// string.
func patternsOnly(s string) string {
	s = linkPath.ReplaceAllString(s, "${1}"+Redacted)
	s = tokenShape.ReplaceAllString(s, Redacted)
	s = claimsShape.ReplaceAllString(s, Redacted)
	for range 2 {
		s = macShape.ReplaceAllString(s, "${1}"+Redacted+"${2}")
	}
	return s
}

func linkToken() string {
	k := approval.RandomKeyring()
	c := approval.NewLinkClaims("op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "grace", "email", time.Unix(1767225600, 0))
	return k.Sign(c, "sha256:00")
}

// FuzzStringMatchesPatterns: String skips patterns only where they cannot
// match, so it always gives what the patterns alone give.
func FuzzStringMatchesPatterns(f *testing.F) {
	token := linkToken()
	kid, rest, _ := strings.Cut(token, ".")
	claims, sig, _ := strings.Cut(rest, ".")
	for _, s := range []string{
		"", "GET", "method", "/v1/operations/op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "https://approvals.example/a/" + token,
		"%2Fa%2F" + token, "/enroll/abc", "token " + token + " end", claims, "x " + sig + " y", sig + "-" + sig,
		kid + "." + claims, strings.Repeat("A", 107) + ".AAAAAAAAAAAAAAAA.BBBBBBBBBBBBBBBB", strings.Repeat("a", 15) + "." + strings.Repeat("b", 15),
		"b3Bf" + strings.Repeat("x", 40), "duration_ms", "127.0.0.1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := String(s), patternsOnly(s); got != want {
			t.Fatalf("String(%q) = %q, the patterns give %q", s, got, want)
		}
	})
}

// TestStringShortcutsCanFail: the differential test compares against
// something that does redact (so a String that skipped everything would
// fail it).
func TestStringShortcutsCanFail(t *testing.T) {
	token := linkToken()
	for _, s := range []string{"/a/" + token, token, "see " + token} {
		if got := patternsOnly(s); strings.Contains(got, token) {
			t.Errorf("the patterns leave %q in %q", token, got)
		}
		if got := String(s); strings.Contains(got, token) {
			t.Errorf("String leaves %q in %q", token, got)
		}
	}
}

// BenchmarkAccessLine is the access log's line for one request (observe in
// web/), through the redacting handler.
func BenchmarkAccessLine(b *testing.B) {
	log := New(slog.NewJSONHandler(io.Discard, nil))
	for b.Loop() {
		log.Log(context.Background(), slog.LevelInfo, "http request", "method", "GET",
			"path", "/v1/operations/op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "status", 200, "duration_ms", 1.234,
			"client", "127.0.0.1", "principal", "bench-agent", "trace_id", "4bf92f3577b34da6a3ce929d0e0e4736")
	}
}
