package browsertest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// testSite: a form page under a strict CSP (with one inline style the CSP
// must block), a result page echoing the posted reason, and a page that
// refreshes itself once.
func testSite(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /form", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action 'self'")
		fmt.Fprint(w, `<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Form</title><link rel="stylesheet" href="/s.css"><style>body{color:red}</style></head>
<body><h1 id="h">Decide <span>now</span></h1>
<form method="post" action="/form"><textarea id="reason" name="reason"></textarea>
<button id="go" name="decision" value="reject">Reject</button></form></body></html>`)
	})
	mux.HandleFunc("GET /s.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		fmt.Fprint(w, `button{min-height:48px;width:100%} h1 span{text-transform:uppercase}`)
	})
	mux.HandleFunc("POST /form", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `<!doctype html><p id="got">%s|%s</p>`,
			strings.ReplaceAll(r.FormValue("reason"), "<", "&lt;"), r.FormValue("decision"))
	})
	mux.HandleFunc("GET /refresh", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("n") == "" {
			fmt.Fprint(w, `<!doctype html><meta http-equiv="refresh" content="0; url=/refresh?n=1"><p id="n">first</p>`)
			return
		}
		fmt.Fprint(w, `<!doctype html><p id="n">second</p>`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestBrowser(t *testing.T) {
	b := Start(t)
	site := testSite(t)
	p := b.NewPage(t, Phone)

	p.Navigate(site.URL + "/form")
	if r := p.LastResponse(); r.Status != 200 || !strings.Contains(r.Headers["Content-Security-Policy"], "default-src 'none'") {
		t.Fatalf("response %+v", r)
	}
	var w struct{ Inner, Scroll int }
	p.Eval(`({Inner: window.innerWidth, Scroll: document.documentElement.scrollWidth})`, &w)
	if w.Inner != Phone.Width || w.Scroll > w.Inner {
		t.Fatalf("widths %+v, want inner %d", w, Phone.Width)
	}
	if got := p.TextContent("#h"); got != "Decide now" {
		t.Fatalf("textContent %q", got)
	}
	if got := p.Text(); !strings.Contains(got, "Decide NOW") {
		t.Fatalf("innerText %q (text-transform should apply)", got)
	}
	if h := p.Box("#go").Height; h < 48 {
		t.Fatalf("button height %v: the stylesheet did not apply", h)
	}
	if !p.Bool(`matchMedia("(pointer: coarse)").matches`) {
		t.Error("phone emulation without a touch pointer")
	}

	// The inline <style> is refused by the CSP, and the page says so.
	p.WaitFor(`true`, time.Second)
	var csp []LogEntry
	for _, e := range p.Logs() {
		if strings.Contains(e.Text, "Content Security Policy") || strings.Contains(e.Text, "ContentSecurityPolicy") {
			csp = append(csp, e)
		}
	}
	if len(csp) == 0 {
		t.Fatalf("no CSP violation observed; logs: %v", p.Logs())
	}
	t.Logf("observed: %v", csp)

	reason := "Wrong invoice — send the November one <please>"
	p.Type("#reason", reason)
	var typed string
	p.Eval(`document.querySelector("#reason").value`, &typed)
	if typed != reason {
		t.Fatalf("typed %q", typed)
	}
	p.ClickAndWait("#go")
	if got := p.TextContent("#got"); got != reason+"|reject" {
		t.Fatalf("posted %q", got)
	}
	if r := p.LastResponse(); r.Status != 202 {
		t.Fatalf("status after post %d", r.Status)
	}

	// WaitFor follows the document across a refresh.
	p.Navigate(site.URL + "/refresh")
	p.WaitFor(`document.querySelector("#n") && document.querySelector("#n").textContent === "second"`, 10*time.Second)

	for _, full := range []bool{false, true} {
		if png := p.Screenshot(full); !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("screenshot (full %v) is not a PNG", full)
		}
	}

	// Missing elements fail clearly (checked in a throwaway test).
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		q := &Page{t: ft, b: p.b, sessionID: p.sessionID, loaded: p.loaded}
		q.Click("#nope")
	}()
	if !strings.Contains(ft.msg, "no element matches") {
		t.Fatalf("click on a missing element: %q", ft.msg)
	}
}

// fakeT captures a Fatalf without ending the real test.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}
