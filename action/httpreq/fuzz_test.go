package httpreq

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzNormalizePath: an accepted path is canonical (normalizing it again
// gives it back), starts with "/", stays on the target when appended to a
// base URL, and carries no traversal or encoded trick: no "." or ".."
// segment, no empty segment, no backslash, no encoded "/", "\", "%", ".",
// no scheme, host, user info, query, fragment or control character.
func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{"/events/42", "/", "/events/42/", "/a%20b", "/%2e%2e/x", "/..;/x", "//evil", "/a/%2f",
		"/a/%252e", `/a\b`, "/a/%00", "/caf%C3%A9", "/a/.%2e/b", "/events/..%00", "http://x/", "/a?b", "/@evil", "/a/%c0%ae%c0%ae"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://target.example/api")
	f.Fuzz(func(t *testing.T, p string) {
		out, segs, err := normalizePath(p)
		if err != nil {
			return
		}
		again, _, err2 := normalizePath(out)
		if err2 != nil || again != out {
			t.Fatalf("%q → %q → %q (%v): not canonical", p, out, again, err2)
		}
		if !strings.HasPrefix(out, "/") || strings.Contains(out, "//") || strings.ContainsAny(out, `\?#@ `) {
			t.Fatalf("%q → %q", p, out)
		}
		low := strings.ToLower(out)
		for _, bad := range []string{"%2f", "%5c", "%25", "%2e", "%00", "%0d", "%0a", "%40", "%3f", "%23"} {
			if strings.Contains(low, bad) {
				t.Fatalf("%q → %q keeps %s", p, out, bad)
			}
		}
		for _, s := range segs {
			if dot, _, _ := strings.Cut(s, ";"); dot == "." || dot == ".." {
				t.Fatalf("%q → segment %q", p, s)
			}
			for _, r := range s {
				if r < 0x20 || r == 0x7f {
					t.Fatalf("%q → control character in %q", p, s)
				}
			}
		}
		for _, s := range strings.Split(out[1:], "/") {
			if s == "." || s == ".." {
				t.Fatalf("%q → %q has a dot segment", p, out)
			}
		}
		tg := &target{base: base}
		u, perr := url.Parse(tg.url(&Request{Path: out, segs: segs}))
		if perr != nil || u.Host != "target.example" || u.Scheme != "https" || !strings.HasPrefix(u.EscapedPath(), "/api/") && u.EscapedPath() != "/api" {
			t.Fatalf("%q → %v (%v) leaves the target", p, u, perr)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("%q → %v", p, u)
		}
	})
}

// FuzzParseRequest: an input parseRequest accepts (single or bulk) is
// stored as canonical JSON that decodeStored reads back to the same
// request, with at most MaxBulkItems items, each without a target or
// items of its own.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"target":"calendar","method":"PATCH","path":"/events/1","body":{"a":1}}`,
		`{"target":"calendar","items":[{"method":"PATCH","path":"/events/1","body":{"start":"x"}},{"method":"DELETE","path":"/events/2"}]}`,
		`{"target":"calendar","items":[{"method":"post","path":"/events","query":{"n":[1,2]},"body":[1]}]}`,
		`{"target":"calendar","items":[{"method":"PATCH","path":"/events/%2e%2e"}]}`,
		`{"target":"calendar","items":[{"target":"x","method":"PATCH","path":"/e"}]}`,
		`{"target":"calendar","method":"PATCH","items":[]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, err := parseRequest([]byte(in))
		if err != nil {
			return
		}
		if len(r.Items) > MaxBulkItems {
			t.Fatalf("%d items accepted", len(r.Items))
		}
		for _, it := range r.Items {
			if it.Target != "" || it.bulk() || it.Method == "" || it.Path == "" {
				t.Fatalf("malformed item accepted: %+v", it)
			}
		}
		stored := canonical(r)
		back, err := decodeStored(stored)
		if err != nil {
			t.Fatalf("%s → %s does not read back: %v", in, stored, err)
		}
		if again := canonical(back); string(again) != string(stored) {
			t.Fatalf("%s → %s → %s", in, stored, again)
		}
	})
}
