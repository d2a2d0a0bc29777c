package main

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/browsertest"
	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/internal/testing/testkit"
	"github.com/countersign/countersign/mcpserver"
)

// Development mode's two doors for the person at the terminal (issue 24,
// points 5 and 6): the waiting page and the single-use sign-in. Each opens
// only with a secret printed on the terminal, which nothing else ever
// carries: guarantee 1 holds for an agent on the same machine.

var (
	devWaitingRE = regexp.MustCompile(`(?m)^ +(http://\S+/dev/waiting\?k=(\S+))$`)
	devSignInRE  = regexp.MustCompile(`(?m)^ +(http://\S+/dev/signin\?k=(\S+))$`)
	reviewHrefRE = regexp.MustCompile(`<a class="review" href="([^"]+)"`)
)

// devDoors reads the two links from the banner.
func devDoors(t *testing.T, srv *testService) (waiting, waitingKey, signIn, signInKey string) {
	t.Helper()
	out := srv.Stderr.String()
	w, s := devWaitingRE.FindStringSubmatch(out), devSignInRE.FindStringSubmatch(out)
	if w == nil || s == nil {
		t.Fatalf("the banner names no waiting page or sign-in link:\n%s", out)
	}
	for _, mark := range []string{"FOR THIS TERMINAL ONLY, never give these two links to an agent", "sign-in:   DEVELOPMENT ONLY"} {
		if !strings.Contains(out, mark) {
			t.Errorf("the banner lacks %q:\n%s", mark, out)
		}
	}
	if len(w[2]) != 43 || len(s[2]) != 43 || w[2] == s[2] {
		t.Fatalf("secrets %q and %q: want two different 32-byte keys", w[2], s[2])
	}
	return w[1], w[2], s[1], s[2]
}

// notFoundLike asserts that a refused door answers exactly as a path that
// does not exist: it reveals nothing, not even that the page exists.
func notFoundLike(t *testing.T, srv *testService, st int, body string, h http.Header, path string) {
	t.Helper()
	_, want, _ := newBrowser().do(t, "GET", srv.URL()+"/dev/no-such-page", nil)
	want = strings.Replace(want, "/dev/no-such-page", path, 1)
	if st != http.StatusNotFound || body != want {
		t.Errorf("refused %s: %d %s, want 404 %s", path, st, body, want)
	}
	if h.Get("Set-Cookie") != "" || h.Get("Location") != "" {
		t.Errorf("refused %s set a cookie or redirected: %v", path, h)
	}
}

func TestDevelopmentWaitingPageAndSignIn(t *testing.T) {
	srv := startService(t, serviceOpts{})
	waiting, waitingKey, signIn, signInKey := devDoors(t, srv)

	// The agent's side, over REST and MCP: what it gets is scanned below.
	o := srv.prepareSend(t, emailBody)
	wire := &syncBuffer{}
	cs := mcpHTTP(t, srv, srv.APIKey, wire)
	m := mcpOK(t, cs, mcpserver.ToolPrepareEmail, emailTo("client@client.example", map[string]any{"subject": "Second invoice"}))
	o2 := mcpOK(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": m.op.OperationKey}).op
	printed := srv.consoleLink(t, o.Key, "you")
	printed2 := srv.consoleLink(t, o2.OperationKey, "you")

	t.Run("refused without the secret", func(t *testing.T) {
		other := strings.Repeat("A", 43)
		for _, tc := range []struct{ name, path, cookie string }{
			{"no key", "/dev/waiting", ""},
			{"wrong key", "/dev/waiting?k=" + other, ""},
			{"short key", "/dev/waiting?k=" + waitingKey[:20], ""},
			{"the sign-in token", "/dev/waiting?k=" + signInKey, ""},
			{"wrong cookie", "/dev/waiting", other},
		} {
			b := newBrowser()
			req, _ := http.NewRequest("GET", srv.URL()+tc.path, nil)
			if tc.cookie != "" {
				req.AddCookie(&http.Cookie{Name: "countersign-dev-waiting", Value: tc.cookie})
			}
			resp, err := b.c.Do(req)
			must(t, err)
			body := readBody(t, resp)
			notFoundLike(t, srv, resp.StatusCode, body, resp.Header, "/dev/waiting")
		}
	})

	b := newBrowser()
	t.Run("the key opens it once, then a cookie", func(t *testing.T) {
		st, _, h := b.do(t, "GET", waiting, nil)
		if st != http.StatusSeeOther || h.Get("Location") != "/dev/waiting" {
			t.Fatalf("GET the banner's link: %d, Location %q; want 303 to /dev/waiting (the key leaves the URL)", st, h.Get("Location"))
		}
		c := h.Get("Set-Cookie")
		for _, want := range []string{"countersign-dev-waiting=" + waitingKey, "HttpOnly", "SameSite=Strict", "Path=/dev/waiting"} {
			if !strings.Contains(strings.ToLower(c), strings.ToLower(want)) {
				t.Errorf("Set-Cookie %q lacks %q", c, want)
			}
		}
		if got := h.Get("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("Referrer-Policy %q", got)
		}
	})

	t.Run("lists what waits, with working approval links", func(t *testing.T) {
		st, page, h := b.do(t, "GET", srv.URL()+"/dev/waiting", nil)
		if st != 200 {
			t.Fatalf("waiting page: %d\n%s", st, page)
		}
		if h.Get("Referrer-Policy") != "no-referrer" || !strings.Contains(h.Get("Cache-Control"), "no-store") {
			t.Errorf("page headers: %v", h)
		}
		for _, want := range []string{o.Key, o2.OperationKey, "Send an email to client@client.example", "dev-agent", "Second invoice", "expires in"} {
			if !strings.Contains(page, want) {
				t.Errorf("the waiting page lacks %q:\n%s", want, page)
			}
		}
		links := reviewHrefRE.FindAllStringSubmatch(page, -1)
		if len(links) != 2 {
			t.Fatalf("%d approval links on the page, want 2:\n%s", len(links), page)
		}
		// Newest first: the MCP one, then the REST one, each the link the
		// console printed for it.
		if links[0][1] != printed2 || links[1][1] != printed {
			t.Fatalf("the page's links %q, %q are not the printed %q, %q", links[0][1], links[1][1], printed2, printed)
		}
		// Approve the first operation through the page's link.
		if st, page := newBrowser().decide(t, links[1][1], "approve", ""); st != 200 {
			t.Fatalf("approve through the page's link: %d\n%s", st, page)
		}
		srv.waitFor(t, o.Key, "succeeded")
		_, page, _ = b.do(t, "GET", srv.URL()+"/dev/waiting", nil)
		if strings.Contains(page, o.Key) || !strings.Contains(page, o2.OperationKey) {
			t.Errorf("after the approval the page should list only %s:\n%s", o2.OperationKey, page)
		}
	})

	var signIns []string
	t.Run("the sign-in works once", func(t *testing.T) {
		p := newBrowser()
		if st, _, h := p.do(t, "GET", srv.URL()+"/inbox", nil); st != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/signin") {
			t.Fatalf("inbox before signing in: %d %v", st, h)
		}
		if st, page, _ := p.do(t, "GET", srv.URL()+"/signin?next=/inbox", nil); st != http.StatusForbidden || !strings.Contains(page, "printed on its terminal") {
			t.Errorf("/signin in development mode: %d\n%s", st, page)
		}
		st, _, h := p.do(t, "GET", signIn, nil)
		if st != http.StatusSeeOther || h.Get("Location") != "/inbox" {
			t.Fatalf("sign-in: %d %v", st, h)
		}
		st, page, _ := p.do(t, "GET", srv.URL()+"/inbox", nil)
		if st != 200 || !strings.Contains(page, o2.OperationKey) || !strings.Contains(page, "You (development)") {
			t.Fatalf("inbox after the development sign-in: %d\n%s", st, page)
		}
		if strings.Contains(page, "item-"+o.Key) {
			t.Errorf("the inbox lists the approved %s", o.Key)
		}
		if st, page, _ := p.do(t, "GET", srv.URL()+"/console", nil); st != 200 || !strings.Contains(page, o.Key) || !strings.Contains(page, "dev-operator") {
			t.Errorf("console after the development sign-in: %d\n%s", st, page)
		}
		if st, page, _ := p.do(t, "GET", srv.URL()+"/inbox/"+o2.OperationKey, nil); st != 200 || !strings.Contains(page, "Approve this action?") {
			t.Errorf("the pending operation in the inbox: %d\n%s", st, page)
		}

		// Spent: a second use, in any browser, signs nobody in.
		for _, q := range []*browser{p, newBrowser()} {
			st, page, h := q.do(t, "GET", signIn, nil)
			if st != http.StatusForbidden || !strings.Contains(page, "works once") || strings.Contains(h.Get("Set-Cookie"), "session") {
				t.Errorf("second use of the sign-in link: %d %v\n%s", st, h, page)
			}
		}
		// The next link is printed on the terminal, and works once too.
		all := devSignInRE.FindAllStringSubmatch(srv.Stderr.String(), -1)
		if len(all) != 2 || all[1][1] == signIn {
			t.Fatalf("want the banner's sign-in link and one next link on the terminal, got %d", len(all))
		}
		if st, _, _ := newBrowser().do(t, "GET", all[1][1], nil); st != http.StatusSeeOther {
			t.Errorf("the next sign-in link: %d", st)
		}
		for _, l := range devSignInRE.FindAllStringSubmatch(srv.Stderr.String(), -1) {
			signIns = append(signIns, l[2])
		}
	})

	t.Run("neither secret leaks", func(t *testing.T) {
		_, mail := srv.call(t, "GET", "/dev/mail", "", "")
		if !strings.Contains(string(mail), "Your invoice") {
			t.Fatalf("the approved email is not in /dev/mail:\n%s", mail)
		}
		srv.waitFor(t, o.Key, "succeeded")
		audit := waitAuditFile(t, srv, o.Key)
		secrets := append([]string{waitingKey}, signIns...)
		texts := map[string]string{
			"REST responses": srv.Transcript.String(), "MCP responses": wire.String(),
			"audit file": audit, "/dev/mail": string(mail),
		}
		for _, f := range testkit.FindLinkSecrets(secrets, texts) {
			t.Error(f)
		}
		// On the terminal, each secret is on exactly one line: its link,
		// alone, in the banner or in the notice of the next sign-in.
		lines := strings.Split(srv.Stderr.String(), "\n")
		for _, s := range secrets {
			n := 0
			for _, l := range lines {
				if strings.Contains(l, s) {
					n++
					if strings.HasPrefix(strings.TrimSpace(l), "{") {
						t.Errorf("a log line carries a development secret: %s", l)
					}
				}
			}
			if n != 1 {
				t.Errorf("secret %s… is on %d lines of the terminal, want 1", s[:6], n)
			}
		}
	})
}

// TestPolicyServiceHasNoDevDoors: a service with a policy file has no
// waiting page and no development sign-in, not even with development
// mode's secrets, and prints neither.
func TestPolicyServiceHasNoDevDoors(t *testing.T) {
	dev := startService(t, serviceOpts{})
	waiting, waitingKey, signIn, _ := devDoors(t, dev)
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "console"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	if out := srv.Stderr.String(); strings.Contains(out, "/dev/waiting") || strings.Contains(out, "/dev/signin") {
		t.Errorf("a policy-file service names a development door:\n%s", out)
	}
	for _, link := range []string{waiting, signIn} {
		u, _ := url.Parse(link)
		b := newBrowser()
		st, body, h := b.do(t, "GET", srv.URL()+u.Path+"?"+u.RawQuery, nil)
		notFoundLike(t, srv, st, body, h, u.Path)
		req, _ := http.NewRequest("GET", srv.URL()+u.Path, nil)
		req.AddCookie(&http.Cookie{Name: "countersign-dev-waiting", Value: waitingKey})
		resp, err := b.c.Do(req)
		must(t, err)
		notFoundLike(t, srv, resp.StatusCode, readBody(t, resp), resp.Header, u.Path)
	}
	// Its inbox still needs an OIDC provider, and there is none.
	if st, page, _ := newBrowser().do(t, "GET", srv.URL()+"/signin", nil); st != http.StatusNotFound || !strings.Contains(page, "Sign-in is not set up") {
		t.Errorf("/signin without oidc: %d\n%s", st, page)
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(b)
}

// waitAuditFile waits until the audit file records the approval of key and
// returns the whole file.
func waitAuditFile(t *testing.T, srv *testService, key string) string {
	t.Helper()
	var b []byte
	for i := 0; i < 400; i++ {
		b, _ = os.ReadFile(srv.AuditPath)
		if strings.Contains(string(b), key) && strings.Contains(string(b), `"succeeded"`) {
			return string(b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the audit file has no outcome of %s:\n%s", key, b)
	return ""
}

// TestBrowserDevWaitingPage: in a real Chromium, the banner's link opens
// the waiting page (the SameSite=Strict cookie works across the redirect),
// the key leaves the address bar and the page's script cannot read it,
// and the listed link leads to the approval page, where Approve runs the
// operation.
func TestBrowserDevWaitingPage(t *testing.T) {
	chromium := browsertest.Start(t)
	srv := startService(t, serviceOpts{})
	waiting, waitingKey, _, _ := devDoors(t, srv)
	o := srv.prepareSend(t, emailBody)
	srv.consoleLink(t, o.Key, "you")

	p := chromium.NewPage(t, browsertest.Desktop)
	p.Navigate(waiting)
	p.WaitFor(`document.title.startsWith("Waiting for you")`, 15*time.Second)
	if u := p.URL(); u != srv.URL()+"/dev/waiting" {
		t.Errorf("the address bar shows %q: the key should have left it", u)
	}
	if p.Bool(`document.cookie.includes("countersign-dev-waiting")`) || strings.Contains(p.Text(), waitingKey) {
		t.Error("the page or its script can read the key")
	}
	if !p.Exists("#item-" + o.Key) {
		t.Fatalf("the waiting page does not list %s:\n%s", o.Key, p.Text())
	}
	p.ClickAndWait("#item-" + o.Key + " a.review")
	if !p.Exists("#decide") {
		t.Fatalf("the link did not open the approval page:\n%s", p.Text())
	}
	p.ClickAndWait("#approve")
	done := srv.waitFor(t, o.Key, "succeeded")
	if len(done.Approval.Approvals) != 1 || done.Approval.Approvals[0].Approver != "you" {
		t.Errorf("approvals %+v", done.Approval.Approvals)
	}
	p.Navigate(srv.URL() + "/dev/waiting")
	p.WaitFor(`document.getElementById("empty") !== null`, 15*time.Second)
}
