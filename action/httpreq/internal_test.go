package httpreq

import (
	"strings"
	"testing"
)

func TestNormalizePathAccepts(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/events/42", "/events/42"},
		{"/", "/"},
		{"/events/42/", "/events/42/"},
		{"/events/a%20b", "/events/a%20b"},
		{"/events/%41%42", "/events/AB"},
		{"/events/café", "/events/caf%C3%A9"},
		{"/events/a:b", "/events/a:b"},
		{"/events/a;b", "/events/a%3Bb"},
		{"/events/...", "/events/..."},
		{"/events/.well-known", "/events/.well-known"},
	} {
		got, _, err := normalizePath(tc.in)
		if err != nil {
			t.Errorf("%q refused: %s (%s)", tc.in, err.rule, err.reason)
			continue
		}
		if got != tc.want {
			t.Errorf("normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
		// Normalizing is idempotent: the stored path reads back the same.
		if again, _, err := normalizePath(got); err != nil || again != got {
			t.Errorf("normalize(normalize(%q)) = %q, %v", tc.in, again, err)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"/events/*", "/events/42", true},
		{"/events/*", "/events/42/", false},
		{"/events/*", "/events", false},
		{"/events/*", "/events/42/attendees", false},
		{"/events/*/", "/events/42/", true},
		{"/events/**", "/events/42/attendees/7", true},
		{"/events/**", "/events", false},
		{"/events/*/attendees/*", "/events/42/attendees/7", true},
		{"/events/*/attendees/*", "/events/42/owners/7", false},
		{"/events", "/events", true},
		{"/events", "/Events", false},
		{"/events/*", "/events/a%2Fb", false}, // refused before matching anyway
	} {
		_, segs, err := normalizePath(tc.path)
		if err != nil {
			if tc.want {
				t.Errorf("%s refused: %s", tc.path, err.rule)
			}
			continue
		}
		if got := parsePattern(tc.pattern).match(segs); got != tc.want {
			t.Errorf("%s ~ %s = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

func TestRedactorAndStrongETag(t *testing.T) {
	r := newRedactor(map[string]string{"Authorization": "Bearer abcdefgh12345678", "X-Short": "ab"})
	got, _ := r.excerpt([]byte(`{"auth":"Bearer abcdefgh12345678","token":"abcdefgh12345678","x":"ab"}`), 1000)
	if strings.Contains(got, "abcdefgh12345678") || !strings.Contains(got, `"x":"ab"`) {
		t.Fatalf("redacted = %s", got)
	}
	for in, want := range map[string]string{`"abc"`: `"abc"`, `W/"abc"`: "", `abc`: "", ``: ""} {
		h := map[string][]string{"Etag": {in}}
		if got := strongETag(h); got != want {
			t.Errorf("strongETag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewRefusesReservedHeaders(t *testing.T) {
	for _, h := range []string{"If-Match", "idempotency-key", "Host", "Content-Length"} {
		_, err := New([]Target{{Name: "t", BaseURL: "https://example.com", Headers: map[string]string{h: "x"},
			Allow: []Rule{{Method: "POST", Path: "/x"}}}})
		if err == nil || !strings.Contains(err.Error(), "set by countersign") {
			t.Errorf("%s: %v", h, err)
		}
	}
	if _, err := New([]Target{{Name: "t", BaseURL: "https://u:p@example.com", Allow: []Rule{{Method: "POST", Path: "/x"}}}}); err == nil {
		t.Error("credentials in the base URL accepted")
	}
	if _, err := New([]Target{{Name: "t", BaseURL: "https://example.com", Allow: []Rule{{Method: "GET", Path: "/x"}}}}); err == nil {
		t.Error("GET accepted")
	}
}
