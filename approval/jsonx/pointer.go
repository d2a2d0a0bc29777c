package jsonx

import (
	"errors"
	"strings"
)

// JSON Pointers (RFC 6901) are the one way countersign addresses a value
// inside a JSON document: route attributes, allowance matches and budgets,
// edits, diffs. A pointer is a list of reference tokens, each a member
// name or an array index, written "/a/b~1c/0" ("~" as "~0", "/" as "~1").
//
// People write attributes dotted ("body.customer.tier"): the tokens joined
// by ".". A dotted name is not a pointer (a member "a.b" and a member "b"
// inside "a" are both "a.b"), so input where two values have the same
// dotted name is refused (CheckMembers), and in what is accepted every
// dotted name stands for exactly one pointer.

// Pointer writes tokens as a JSON Pointer.
func Pointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(escapeToken(t))
	}
	return sb.String()
}

var tokenEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return tokenEscaper.Replace(t)
}

// ParsePointer reads a JSON Pointer into its tokens. "" is the whole
// document (no tokens).
func ParsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, errors.New("a JSON Pointer starts with /")
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, errors.New(`in a JSON Pointer "~" is written "~0" and "/" "~1"`)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// DottedName is the name people write for the value at tokens: the tokens
// joined by ".".
func DottedName(tokens []string) string { return strings.Join(tokens, ".") }
