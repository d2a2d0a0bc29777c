package safetext

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/net/idna"
)

// Look-alikes: text that shows no hidden character yet reads as something
// it is not. A host name written with letters of another script
// ("раypal.com", Cyrillic р and а) looks like the real one; a URL's user
// name before "@" ("https://paypal.com@evil.example/") looks like its
// host; a word mixing scripts ("generаl") is not the word it reads as.
// These find them, so that the approver is told what the text really
// names; what is sent is not changed.

// urlPattern matches a URL with an authority ("scheme://…") up to the
// first character that cannot be part of one in running text.
var urlPattern = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.\-]{0,31}://[^\s<>"'` + "`" + `{}|\\^\[\]()]+`)

// maxNotes bounds what one string reports.
const maxNotes = 10

// WireURL returns u with a host written in other letters than ASCII in
// its wire form (punycode: "https://xn--ypal-43d9g.com/login"), which is
// where it leads; any other u is returned as is.
func WireURL(u string) string {
	start, end, host, _, ok := authority(u)
	if !ok || isASCII(host) {
		return u
	}
	ascii, err := idna.ToASCII(host)
	if err != nil || ascii == host {
		return u
	}
	return u[:start] + strings.Replace(u[start:end], host, ascii, 1) + u[end:]
}

// bareIDN matches a host name without a scheme whose top-level label is
// ASCII ("аррӏе.com", all Cyrillic but the ".com"), which mail programs
// and chat clients turn into a link.
var bareIDN = regexp.MustCompile(`[\p{L}\p{M}\p{N}-]+(?:\.[\p{L}\p{M}\p{N}-]+)*\.[a-zA-Z]{2,63}\b`)

// DeceptiveURLs lists, in order and without repeats, a sentence for each
// URL in s whose host is not what it seems: written in other letters
// than ASCII ("раypal.com is really xn--ypal-43d9g.com"), or preceded by
// a user name ("paypal.com@evil.example goes to evil.example"); and for
// each host name written without a scheme in other letters than ASCII.
func DeceptiveURLs(s string) []string {
	var out []string
	if !isASCII(s) {
		for _, h := range bareIDN.FindAllString(s, 50) {
			if isASCII(h) {
				continue
			}
			ascii, err := idna.ToASCII(strings.ToLower(h))
			if err != nil || ascii == h {
				continue
			}
			if note := fmt.Sprintf("“%s” is really %s", cut(h), ascii); !contains(out, note) && len(out) < maxNotes {
				out = append(out, note)
			}
		}
	}
	if !strings.Contains(s, "://") {
		return out
	}
	for _, u := range urlPattern.FindAllString(s, 50) {
		u = strings.TrimRight(u, ".,;:!?")
		_, _, host, user, ok := authority(u)
		if !ok {
			continue
		}
		var note string
		switch {
		case !isASCII(host):
			ascii, err := idna.ToASCII(host)
			if err != nil {
				note = fmt.Sprintf("“%s” is not a valid host name", cut(host))
			} else {
				note = fmt.Sprintf("“%s” is really %s", cut(host), ascii)
			}
		case user != "":
			note = fmt.Sprintf("“%s@%s” goes to %s (what comes before @ is a user name, not the site)", cut(user), cut(host), cut(host))
		default:
			continue
		}
		if !contains(out, note) {
			out = append(out, note)
			if len(out) == maxNotes {
				break
			}
		}
	}
	return out
}

// authority finds the host of a URL "scheme://[user@]host[:port]…": the
// byte range of the authority, the host and the user name.
func authority(u string) (start, end int, host, user string, ok bool) {
	i := strings.Index(u, "://")
	if i < 0 {
		return 0, 0, "", "", false
	}
	start = i + 3
	end = len(u)
	if j := strings.IndexAny(u[start:], "/?#"); j >= 0 {
		end = start + j
	}
	auth := u[start:end]
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		user, auth = auth[:at], auth[at+1:]
	}
	host = auth
	if c := strings.LastIndexByte(host, ':'); c >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:c]
	}
	return start, end, host, user, host != ""
}

// confusable are the scripts with letters that look like Latin ones.
var confusable = []struct {
	name  string
	table *unicode.RangeTable
}{
	{"Cyrillic", unicode.Cyrillic}, {"Greek", unicode.Greek}, {"Armenian", unicode.Armenian},
	{"Cherokee", unicode.Cherokee}, {"Coptic", unicode.Coptic}, {"Lisu", unicode.Lisu},
}

// MixedScriptWords lists, in order and without repeats, the words of s
// (runs of letters, marks and digits) that mix Latin letters with letters
// of a script that has look-alikes of them, each with the first such
// letter: "“generаl” (U+0430 CYRILLIC SMALL LETTER A)". A word written in
// one script is never listed.
func MixedScriptWords(s string) []string {
	var out []string
	word := func(w string) {
		latin, other := false, rune(-1)
		for _, r := range w {
			switch {
			case !unicode.IsLetter(r):
			case unicode.Is(unicode.Latin, r):
				latin = true
			case other < 0:
				for _, c := range confusable {
					if unicode.Is(c.table, r) {
						other = r
						break
					}
				}
			}
		}
		if latin && other >= 0 {
			note := fmt.Sprintf("“%s” (%s)", cut(w), Describe(other))
			if !contains(out, note) && len(out) < maxNotes {
				out = append(out, note)
			}
		}
	}
	start := -1
	for i, r := range s {
		in := unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r)
		switch {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			word(s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		word(s[start:])
	}
	return out
}

func cut(s string) string {
	if r := []rune(s); len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return s
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// bareHost matches a link text that is a host name, maybe with a path
// ("paypal.com", "www.paypal.com/login").
var bareHost = regexp.MustCompile(`(?i)^[a-z0-9-]+(?:\.[a-z0-9-]+)+(?:[/?#]\S*)?$`)

// LinkMismatch returns a sentence when a link's visible text is an address
// (a URL or a host name) on another host than the link's target goes to:
// "“https://paypal.com/login” goes to evil.example". A target on the
// text's host or one of its subdomains, and a text that names no host,
// give "".
func LinkMismatch(text, href string) string {
	text = strings.TrimSpace(text)
	var shown string
	if u := urlPattern.FindString(text); u != "" {
		_, _, shown, _, _ = authority(u)
	} else if bareHost.MatchString(text) {
		shown = text
		if i := strings.IndexAny(shown, "/?#"); i >= 0 {
			shown = shown[:i]
		}
		if fileName(shown) {
			shown = "" // "report.pdf" names a file, not a host
		}
	}
	_, _, real, _, ok := authority(href)
	if shown == "" || !ok {
		return ""
	}
	norm := func(h string) string {
		h = strings.TrimSuffix(strings.ToLower(h), ".")
		if a, err := idna.ToASCII(h); err == nil {
			h = a
		}
		return strings.TrimPrefix(h, "www.")
	}
	s, r := norm(shown), norm(real)
	if s == r || strings.HasSuffix(r, "."+s) {
		return ""
	}
	return fmt.Sprintf("“%s” goes to %s", cut(text), cut(norm(real)))
}

// fileName reports whether a host-shaped text ends like a file name.
func fileName(s string) bool {
	ext := strings.ToLower(s[strings.LastIndexByte(s, '.')+1:])
	switch ext {
	case "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "txt", "csv", "json", "xml",
		"png", "jpg", "jpeg", "gif", "svg", "webp", "zip", "gz", "tar", "exe", "html", "htm", "ics", "eml":
		return true
	}
	return false
}
