package httpreq

import (
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// pathError is a refused path: the rule that refused it and why, for
// details.rule and details.fields of an invalid_input error.
type pathError struct {
	rule   string
	reason string
}

var schemePrefix = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// maxPath bounds the length of a path as the agent sends it.
const maxPath = 2048

// normalizePath checks an agent's path and returns it in one canonical
// form (each segment decoded, checked, and escaped again), with its decoded
// segments for matching the allow-list. The path is only ever appended to
// the target's base URL, so anything that could leave it is refused:
// schemes and hosts ("https://…", "//host"), dot segments (also encoded,
// "%2e%2e", and "..;"), encoded separators ("%2f", "%5c"), backslashes,
// double encoding ("%25"), user info ("@"), control characters, a query
// or fragment (also encoded, "%3f", "%23"), and empty segments ("//").
func normalizePath(p string) (string, []string, *pathError) {
	switch {
	case p == "":
		return "", nil, &pathError{"path_required", "required"}
	case len(p) > maxPath:
		return "", nil, &pathError{"path_too_long", "longer than 2048 characters"}
	case !utf8.ValidString(p):
		return "", nil, &pathError{"control_character", "not valid UTF-8"}
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", nil, &pathError{"control_character", "contains a control character"}
		}
	}
	switch {
	case strings.Contains(p, `\`):
		return "", nil, &pathError{"backslash", `contains a backslash; use "/" between segments`}
	case strings.HasPrefix(p, "//") || strings.Contains(p, "://") || schemePrefix.MatchString(p):
		return "", nil, &pathError{"absolute_url", "must be a path on the target (like /events/42), not a URL or a host"}
	case !strings.HasPrefix(p, "/"):
		return "", nil, &pathError{"relative_path", `must start with "/"`}
	case strings.ContainsAny(p, "?#"):
		return "", nil, &pathError{"query_in_path", `must not contain "?" or "#"; pass query parameters in "query"`}
	case strings.Contains(p, "@"):
		return "", nil, &pathError{"userinfo", `must not contain "@"`}
	case strings.ContainsAny(p, " \"<>`{}|^"):
		return "", nil, &pathError{"invalid_character", "contains a space or a character that must be percent-encoded"}
	}
	raw := strings.Split(p[1:], "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		if s == "" {
			if i == len(raw)-1 && i > 0 {
				segs[i] = "" // a trailing slash is kept
				continue
			}
			if i == 0 && len(raw) == 1 {
				segs = segs[:0] // "/" itself
				break
			}
			return "", nil, &pathError{"empty_segment", `contains an empty segment ("//")`}
		}
		d, err := url.PathUnescape(s)
		if err != nil {
			return "", nil, &pathError{"invalid_escape", "contains a malformed percent-escape"}
		}
		switch {
		case strings.Contains(d, "/") || strings.Contains(d, `\`):
			return "", nil, &pathError{"encoded_separator", "contains an encoded slash or backslash (%2f, %5c)"}
		case strings.ContainsAny(d, "?#"):
			// A target or proxy that decodes the path before splitting it would
			// read a query (or fragment) the route's query rules never saw.
			return "", nil, &pathError{"query_in_path", `contains an encoded "?" or "#" (%3f, %23); pass query parameters in "query"`}
		case strings.Contains(d, "%"):
			return "", nil, &pathError{"double_encoding", "contains an encoded percent sign (%25)"}
		case strings.Contains(d, "@"):
			return "", nil, &pathError{"userinfo", `must not contain "@"`}
		case !utf8.ValidString(d):
			return "", nil, &pathError{"invalid_escape", "decodes to invalid UTF-8"}
		}
		for _, r := range d {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				return "", nil, &pathError{"control_character", "contains an encoded control character"}
			}
		}
		if dot, _, _ := strings.Cut(d, ";"); dot == "." || dot == ".." {
			return "", nil, &pathError{"path_traversal", `contains a "." or ".." segment (also when encoded)`}
		}
		segs[i] = d
	}
	return joinPath(segs), segs, nil
}

// joinPath escapes decoded segments into a path.
func joinPath(segs []string) string {
	if len(segs) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// pattern is an allow-list path pattern: literal segments, "*" for one
// whole segment, and a final "**" for one or more.
type pattern []string

func parsePattern(p string) pattern {
	if p == "/" {
		return pattern{}
	}
	return pattern(strings.Split(strings.TrimPrefix(p, "/"), "/"))
}

func (pt pattern) match(segs []string) bool {
	for i, s := range pt {
		if s == "**" && i == len(pt)-1 {
			return len(segs) > i
		}
		if i >= len(segs) {
			return false
		}
		if s == "*" {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if s != segs[i] {
			return false
		}
	}
	return len(segs) == len(pt)
}
