// Package redact keeps capabilities out of logs by construction: a
// slog.Handler that rewrites anything shaped like an approval link token
// (approval.Keyring.Sign's kid.claims.signature) and any /a/<token> path in
// every message and attribute, whoever logs it. A new log line cannot leak
// a link, whatever it logs: a path, an error, a panic value, a URL.
package redact

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// Redacted replaces what was removed.
const Redacted = "…redacted"

var (
	// A link token: a key id, the claims and a signature, each base64url
	// (the signature alone is 43 characters). Anything of that shape goes,
	// wherever it stands.
	tokenShape = regexp.MustCompile(`[A-Za-z0-9_-]{1,64}\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`)
	// An approval page path, also percent-encoded (%2Fa%2F), or a passkey
	// enrolment path (/enroll/…), up to the end of the path.
	linkPath = regexp.MustCompile(`(?i)((?:/|%2F)(?:a|enroll)(?:/|%2F))[^\s"'<>?#&]+`)
	// A token's claims segment on its own: base64url of "op_…|approver|…"
	// always starts with "b3Bf".
	claimsShape = regexp.MustCompile(`b3Bf[A-Za-z0-9_-]{40,}`)
	// A signature (or a CSRF token, another HMAC-SHA256) on its own: 43
	// base64url characters standing alone.
	macShape = regexp.MustCompile(`(^|[^A-Za-z0-9_-])[A-Za-z0-9_-]{43}($|[^A-Za-z0-9_-])`)
)

// String returns s with link paths and link-shaped tokens replaced.
//
// Every log line passes here, and most of what is logged (keys, methods,
// statuses, addresses, ids) can hold none of these shapes, so each pattern
// runs only on a string where it could match: a link path needs a '/' or a
// '%', a token a '.' and a run of 16 base64url characters, a claims segment
// "b3Bf", a lone signature a run of exactly 43. Replacing never makes a
// longer run or a new run of 43 (what it puts in is "…redacted" between the
// same neighbours), so each check holds for the string its pattern sees.
// FuzzStringMatchesPatterns holds String to the patterns alone.
func String(s string) string {
	if strings.ContainsAny(s, "/%") {
		s = linkPath.ReplaceAllString(s, "${1}"+Redacted)
	}
	if strings.IndexByte(s, '.') >= 0 {
		if longest, _ := runs(s); longest >= 16 {
			s = tokenShape.ReplaceAllString(s, Redacted)
		}
	}
	if strings.Contains(s, "b3Bf") {
		s = claimsShape.ReplaceAllString(s, Redacted)
	}
	if _, has43 := runs(s); !has43 {
		return s
	}
	for range 2 { // twice: two signatures one character apart share it
		s = macShape.ReplaceAllString(s, "${1}"+Redacted+"${2}")
	}
	return s
}

// runs reports the longest run of base64url characters in s, and whether
// a run of exactly 43 stands in it.
func runs(s string) (longest int, has43 bool) {
	run := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			if c := s[i]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
				run++
				continue
			}
		}
		longest = max(longest, run)
		has43 = has43 || run == 43
		run = 0
	}
	return longest, has43
}

// Handler wraps next so that every record it handles is redacted.
func Handler(next slog.Handler) slog.Handler {
	if h, ok := next.(*handler); ok {
		return h // already redacting
	}
	return &handler{next: next}
}

// New is a logger whose records are redacted before next sees them.
func New(next slog.Handler) *slog.Logger { return slog.New(Handler(next)) }

type handler struct{ next slog.Handler }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(Attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = Attr(a)
	}
	return &handler{next: h.next.WithAttrs(clean)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(String(name))}
}

// Attr redacts one attribute: its key, its string value, and any other
// value whose text carries a link (an error, a Stringer, a struct: it is
// then logged as its redacted text).
func Attr(a slog.Attr) slog.Attr {
	a.Key = String(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = Attr(g)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case error:
			text = x.Error()
		case fmt.Stringer:
			text = x.String()
		default:
			text = fmt.Sprintf("%+v", x)
		}
		if clean := String(text); clean != text {
			a.Value = slog.StringValue(clean)
		} else {
			a.Value = v
		}
	default:
		a.Value = v
	}
	return a
}
