package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/testing/testkit"
	"github.com/countersign/countersign/web"
)

// Development mode's doors (web/dev.go): the waiting page and the
// single-use sign-in open only with their secret; without it they answer
// as a path that does not exist; a service without DevConfig has neither.

// local turns one of the doors' links (on the public URL) into the same
// request to the test listener.
func (e *pageEnv) local(link string) string {
	u, err := url.Parse(link)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.base + u.RequestURI()
}

func devEnv(t *testing.T, terminal *testkit.Buffer, links map[string]string) *pageEnv {
	var mu sync.Mutex
	return newPageEnv(t, pageOpts{dev: &web.DevConfig{Approver: "grace", Operator: "", Name: "Grace (development)",
		Terminal: terminal, Link: func(op, approver string) string {
			mu.Lock()
			defer mu.Unlock()
			if approver != "grace" {
				return ""
			}
			return links[op]
		}}})
}

// assertAbsent: the answer is exactly that of a path that does not exist.
func assertAbsent(t *testing.T, e *pageEnv, what string, r response, path string) {
	t.Helper()
	none := newClient("").do(t, "GET", e.base+"/dev/nothing-here", nil, nil)
	want := strings.Replace(none.body, "/dev/nothing-here", path, 1)
	if r.status != http.StatusNotFound || r.body != want {
		t.Errorf("%s: %d %s, want 404 %s", what, r.status, r.body, want)
	}
	for _, h := range []string{"Set-Cookie", "Location", "Content-Security-Policy", "Referrer-Policy"} {
		if r.header.Get(h) != "" {
			t.Errorf("%s: answered with %s %q, which a missing path does not", what, h, r.header.Get(h))
		}
	}
}

func TestDevWaitingPageOpensOnlyWithItsKey(t *testing.T) {
	links := map[string]string{}
	e := devEnv(t, &testkit.Buffer{}, links)
	printed, _ := e.pending("Printed here")
	other, _ := e.pending("Printed by another run")
	links[printed.Key] = "http://countersign.test/a/the-printed-link"

	key := strings.TrimPrefix(e.devWaiting, pagePublicURL+"/dev/waiting?k=")
	for name, c := range map[string]struct{ query, cookie string }{
		"no key":        {},
		"wrong key":     {query: "?k=" + strings.Repeat("x", 43)},
		"key and more":  {query: "?k=" + key + "x"},
		"key truncated": {query: "?k=" + key[:42]},
		"wrong cookie":  {cookie: strings.Repeat("x", 43)},
	} {
		hdr := map[string]string{}
		if c.cookie != "" {
			hdr["Cookie"] = "countersign-dev-waiting=" + c.cookie
		}
		assertAbsent(t, e, name, newClient("").do(t, "GET", e.base+"/dev/waiting"+c.query, nil, hdr), "/dev/waiting")
	}

	b := newClient("")
	r := b.do(t, "GET", e.local(e.devWaiting), nil, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/dev/waiting" {
		t.Fatalf("the key: %d, Location %q", r.status, r.header.Get("Location"))
	}
	assertPageHeaders(t, "the key's redirect", r.header)
	ck := strings.ToLower(r.header.Get("Set-Cookie"))
	for _, want := range []string{"httponly", "samesite=strict", "path=/dev/waiting"} {
		if !strings.Contains(ck, want) {
			t.Errorf("cookie %q lacks %s", ck, want)
		}
	}
	r = b.do(t, "GET", e.base+"/dev/waiting", nil, nil)
	if r.status != 200 {
		t.Fatalf("with the cookie: %d %s", r.status, r.body)
	}
	assertPageHeaders(t, "the waiting page", r.header)
	for _, want := range []string{"item-" + printed.Key, "item-" + other.Key, `href="http://countersign.test/a/the-printed-link"`,
		`href="/inbox/` + other.Key + `"`, "requested by agent <strong class=\"requester\">agent</strong>"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the waiting page lacks %s:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, key) || strings.Contains(e.log.String(), key) {
		t.Errorf("the key is on the page or in the log:\n%s", e.log.String())
	}
}

func TestDevSignInWorksOnce(t *testing.T) {
	terminal := &testkit.Buffer{}
	e := devEnv(t, terminal, map[string]string{})
	op, _ := e.pending("Waiting in the inbox")

	// A HEAD (a link preview) spends nothing.
	if r := newClient("").do(t, "HEAD", e.local(e.devSignIn), nil, nil); r.status != http.StatusOK || r.header.Get("Set-Cookie") != "" {
		t.Fatalf("HEAD of the sign-in link: %d %v", r.status, r.header)
	}
	// The first use, from many browsers at once: exactly one signs in.
	const n = 8
	var wg sync.WaitGroup
	got := make([]response, n)
	people := make([]*client, n)
	for i := range n {
		people[i] = newClient("")
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = people[i].do(t, "GET", e.local(e.devSignIn), nil, nil) }()
	}
	wg.Wait()
	var in *client
	for i, r := range got {
		switch {
		case r.status == http.StatusSeeOther && r.header.Get("Location") == "/inbox":
			if in != nil {
				t.Fatal("one sign-in link signed in twice")
			}
			in = people[i]
		case r.status == http.StatusForbidden && strings.Contains(r.body, "works once"):
			if strings.Contains(r.header.Get("Set-Cookie"), "session") {
				t.Errorf("a refused sign-in set a session cookie: %v", r.header)
			}
		default:
			t.Errorf("sign-in: %d %v\n%s", r.status, r.header, r.body)
		}
	}
	if in == nil {
		t.Fatal("nobody signed in")
	}
	r := in.do(t, "GET", e.base+"/inbox", nil, nil)
	if r.status != 200 || !strings.Contains(r.body, "item-"+op.Key) || !strings.Contains(r.body, "Grace (development)") {
		t.Fatalf("the inbox after the sign-in: %d\n%s", r.status, r.body)
	}
	// No operator named: the console stays shut to this session.
	if r := in.do(t, "GET", e.base+"/console", nil, nil); r.status != http.StatusForbidden {
		t.Errorf("console for a session without an operator: %d", r.status)
	}

	// The next link is on the terminal only, and works once.
	tok := strings.TrimPrefix(e.devSignIn, pagePublicURL+"/dev/signin?k=")
	next := devSignInLink.FindString(terminal.String())
	if next == "" || strings.Contains(next, tok) || !strings.Contains(terminal.String(), "DEVELOPMENT ONLY") {
		t.Fatalf("no next sign-in link on the terminal:\n%s", terminal.String())
	}
	if r := newClient("").do(t, "GET", e.local(next), nil, nil); r.status != http.StatusSeeOther {
		t.Errorf("the next link: %d", r.status)
	}
	if r := newClient("").do(t, "GET", e.local(next), nil, nil); r.status != http.StatusForbidden {
		t.Errorf("the next link, again: %d", r.status)
	}
	for _, s := range []string{tok, strings.TrimPrefix(next, pagePublicURL+"/dev/signin?k=")} {
		if strings.Contains(e.log.String(), s) {
			t.Errorf("a sign-in token is in the log:\n%s", e.log.String())
		}
	}
	// /signin says where the sign-in is instead of pretending to OIDC.
	if r := newClient("").do(t, "GET", e.base+"/signin?next=/inbox", nil, nil); r.status != http.StatusForbidden || !strings.Contains(r.body, "terminal") {
		t.Errorf("/signin in development mode: %d\n%s", r.status, r.body)
	}
}

// TestNoDevDoorsOutsideDevelopment: without DevConfig neither route exists.
func TestNoDevDoorsOutsideDevelopment(t *testing.T) {
	e := newPageEnv(t, pageOpts{})
	for _, p := range []string{"/dev/waiting", "/dev/signin"} {
		assertAbsent(t, e, p, newClient("").do(t, "GET", e.base+p+"?k="+strings.Repeat("x", 43), nil, nil), p)
	}
}

var devSignInLink = regexp.MustCompile(`http://countersign\.test/dev/signin\?k=\S+`)
