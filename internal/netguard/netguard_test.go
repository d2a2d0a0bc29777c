package netguard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestPublic(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
	}{
		{"93.184.216.34", true},
		{"2606:2800:220:1:248:1893:25c8:1946", true},
		{"127.0.0.1", false},
		{"127.1.2.3", false},
		{"::1", false},
		{"10.0.0.1", false},
		{"172.16.5.4", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false}, // cloud metadata
		{"100.64.0.1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"fc00::1", false},
		{"fe80::1", false},
		{"::ffff:127.0.0.1", false}, // IPv4-mapped loopback
		{"::ffff:10.0.0.1", false},
		{"64:ff9b::a00:1", false}, // NAT64 of 10.0.0.1
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"198.18.0.1", false},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := Public(a); got != tc.public {
			t.Errorf("Public(%s) = %v, want %v", tc.addr, got, tc.public)
		}
		err := PublicOnly.Control("tcp", netip.AddrPortFrom(a, 443).String(), nil)
		if (err == nil) != tc.public || (err != nil && !Refused(err)) {
			t.Errorf("PublicOnly(%s) = %v", tc.addr, err)
		}
		loop := AllowLoopback.Control("tcp", netip.AddrPortFrom(a, 443).String(), nil)
		if want := tc.public || a.Unmap().IsLoopback(); (loop == nil) != want {
			t.Errorf("AllowLoopback(%s) = %v, want allowed %v", tc.addr, loop, want)
		}
		if err := AllowAll.Control("tcp", netip.AddrPortFrom(a, 443).String(), nil); err != nil {
			t.Errorf("AllowAll(%s) = %v", tc.addr, err)
		}
	}
}

func TestClientRefusesLoopbackAndRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(204)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	get := func(c *http.Client, path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		return c.Do(req)
	}
	if _, err := get(Client(PublicOnly, time.Second), "/"); !Refused(err) {
		t.Fatalf("public-only client reached loopback: %v", err)
	}
	resp, err := get(Client(AllowLoopback, time.Second), "/redirect")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("redirect was followed: %d", resp.StatusCode)
	}
}

func TestCheckCallbackURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://agents.example/hooks/cs":       true,
		"https://agents.example:8443/h?x=1":     true,
		"http://127.0.0.1:9000/hook":            true,
		"http://localhost:9000/hook":            true,
		"http://[::1]:9000/hook":                true,
		"http://agents.example/hook":            false,
		"http://10.0.0.5/hook":                  false,
		"https://user:pw@agents.example/hook":   false,
		"https://agents.example/hook#frag":      false,
		"ftp://agents.example/hook":             false,
		"/relative":                             false,
		"https://":                              false,
		"mailto:x@example.com":                  false,
		"http://localhost.evil.example:80/hook": false,
		"http://127.0.0.1.nip.io/hook":          false,
	} {
		err := CheckCallbackURL(raw)
		if (err == nil) != ok {
			t.Errorf("CheckCallbackURL(%q) = %v, want ok %v", raw, err, ok)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("error repeats the URL: %v", err)
		}
	}
	if PolicyFor("http://127.0.0.1:1/x") != AllowLoopback || PolicyFor("https://agents.example/") != PublicOnly {
		t.Fatal("PolicyFor")
	}
}
