package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/browsertest"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// The approval page as a hostile agent would shape it, in a real headless
// Chromium: hidden characters shown, an HTML part shown as its recipient
// sees it (sandboxed, nothing loaded from elsewhere) with its links and a
// warning when it says something else than the text part, a long body in
// full in the page, and the decision bar on the first screen whose Approve
// appears only once the whole request has been on screen.

// spoofEmail is an email.send input of the kinds issue 8 showed: a display
// name and a subject turned around by U+202E, zero-width characters, an
// HTML part that asks for something the text part does not, with a remote
// image at remote, and a text of many lines.
func spoofEmail(t *testing.T, remote string, lines int) string {
	var text strings.Builder
	text.WriteString("Hi Mei,\nLunch on Friday?\n")
	for i := range lines {
		fmt.Fprintf(&text, "Line %d of the agenda.\n", i+1)
	}
	text.WriteString("Cheers,\nSam\n")
	b, err := json.Marshal(map[string]any{"action": "email.send", "input": map[string]any{
		"to":      []string{"\"Mei Chen \u202e<moc.knab@oec>\" <client@client.example>"},
		"subject": "Q3 numbers \u202eexe.fdp",
		"text":    "Zero\u200bwidth\u200c.\n" + text.String(),
		"html": `<p>Please wire <b>$50,000</b> to <a href="https://evil.example/pay">our usual account</a> today.</p>` +
			`<img src="` + remote + `/pixel.gif" alt="logo"><script>document.title="pwned"</script>`,
	}})
	must(t, err)
	return string(b)
}

// remoteServer counts the requests a page makes to "elsewhere".
func remoteServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/gif")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

const readRenderJS = `(() => {
	const q = s => document.querySelector(s);
	const vis = s => q(s) ? getComputedStyle(q(s)).visibility : "";
	const frame = q("iframe");
	const r = el => { if (!el) return null; const b = el.getBoundingClientRect(); return {Top: b.top, Bottom: b.bottom, Height: b.height}; };
	const fields = {};
	for (const dt of document.querySelectorAll("#fields dt")) {
		const v = dt.nextElementSibling.querySelector("pre.agent, span.agent");
		fields[dt.textContent] = v ? v.textContent : "";
	}
	return {
		Fields: fields,
		Warnings: [...document.querySelectorAll("#warnings li")].map(li => li.textContent),
		Links: [...document.querySelectorAll("#links li")].map(li => li.textContent),
		Frame: !!frame, Sandbox: frame ? frame.getAttribute("sandbox") : null, SrcDoc: frame ? frame.getAttribute("srcdoc") : "",
		FrameHeight: frame ? frame.getBoundingClientRect().height : 0,
		BarApprove: vis("#bar-approve"), BarRead: vis("#bar-read"),
		What: r(q("#what")), Bar: r(q("#bar")), ViewportHeight: window.innerHeight,
		InnerScroll: [...document.querySelectorAll("pre")].filter(p => p.closest("details") === null && p.scrollHeight > p.clientHeight + 1).length,
		Title: document.title,
	};
})()`

type renderView struct {
	Fields              map[string]string
	Warnings, Links     []string
	Frame               bool
	Sandbox             *string
	SrcDoc              string
	FrameHeight         float64
	BarApprove, BarRead string
	What, Bar           *struct{ Top, Bottom, Height float64 }
	ViewportHeight      float64
	InnerScroll         int
	Title               string
}

func TestBrowserSpoofedRequest(t *testing.T) {
	chromium := browsertest.Start(t)
	remote, hits := remoteServer(t)
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	o := srv.prepareSend(t, spoofEmail(t, remote.URL, 120))
	link := approvalLink(t, smtp, "grace@example.com")

	for _, vp := range []struct {
		name string
		vp   browsertest.Viewport
	}{{"phone", browsertest.Phone}, {"desktop", browsertest.Desktop}} {
		t.Run(vp.name, func(t *testing.T) {
			p := chromium.NewPage(t, vp.vp)
			p.Navigate(link)
			if r := p.LastResponse(); r.Status != 200 {
				t.Fatalf("HTTP %d", r.Status)
			}
			var v renderView
			p.Eval(readRenderJS, &v)

			// Hidden characters are visible escapes, and a warning names them.
			if to := v.Fields["To"]; !strings.Contains(to, "⟨U+202E⟩") || strings.ContainsRune(to, '\u202e') || !strings.Contains(to, "<client@client.example>") {
				t.Errorf("To shows %q", to)
			}
			if s := v.Fields["Subject"]; s != "Q3 numbers ⟨U+202E⟩exe.fdp" {
				t.Errorf("Subject shows %q", s)
			}
			if s := v.Fields["Text"]; !strings.HasPrefix(s, "Zero⟨U+200B⟩width⟨U+200C⟩.\n") {
				t.Errorf("Text starts %q", s[:min(len(s), 60)])
			}
			warned := strings.Join(v.Warnings, "\n")
			for _, want := range []string{"U+202E RIGHT-TO-LEFT OVERRIDE", "U+200B ZERO WIDTH SPACE", "does not say what the text part says",
				"“wire”", "“50000”", "remote resource", "A display name looks like an address"} {
				if !strings.Contains(warned, want) {
					t.Errorf("no warning saying %q in:\n%s", want, warned)
				}
			}
			// The HTML part: a sandboxed frame of the sanitized document, its
			// link listed with where it really goes, nothing loaded or run.
			if !v.Frame || v.Sandbox == nil || *v.Sandbox != "" {
				t.Errorf("frame %v sandbox %v", v.Frame, v.Sandbox)
			}
			if strings.Contains(v.SrcDoc, "<script") || strings.Contains(v.SrcDoc, "<img") || strings.Contains(v.SrcDoc, "href=") ||
				!strings.Contains(v.SrcDoc, "Please wire") {
				t.Errorf("frame document %q", v.SrcDoc)
			}
			if len(v.Links) != 1 || !strings.Contains(v.Links[0], "our usual account → https://evil.example/pay") {
				t.Errorf("links %q", v.Links)
			}
			if v.Title == "pwned" || strings.Contains(p.Text(), "pwned") {
				t.Error("the agent's script ran")
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the page loaded %d remote resources", n)
			}
			// A long body is in the page flow, in full, with its size.
			if v.InnerScroll != 0 {
				t.Errorf("%d inner scroll boxes hide lines", v.InnerScroll)
			}
			if !strings.Contains(v.Fields["Text"], "Line 120 of the agenda.") || !strings.Contains(p.Text(), "125 lines") {
				t.Errorf("the text is not shown whole with its size")
			}
			// The first screen says what will happen and holds the decision
			// bar, whose Approve waits until the end has been on screen.
			if v.What == nil || v.What.Top < 0 || v.What.Bottom > v.ViewportHeight || v.Bar == nil || v.Bar.Bottom > v.ViewportHeight+1 {
				t.Errorf("first screen: what %+v bar %+v (viewport %v)", v.What, v.Bar, v.ViewportHeight)
			}
			if v.BarApprove != "hidden" || v.BarRead != "visible" {
				t.Errorf("before reading: bar approve %q, read link %q", v.BarApprove, v.BarRead)
			}
			saveScreenshotViewport(t, p, "spoof-"+vp.name+"-first-screen.png")
			p.Eval(`(document.querySelector("#end-of-content").scrollIntoView({block: "center", behavior: "instant"}), true)`, nil)
			p.WaitFor(`getComputedStyle(document.querySelector("#bar-approve")).visibility === "visible"`, 5*time.Second)
			saveScreenshotViewport(t, p, "spoof-"+vp.name+"-end.png")
			checkNoCSPViolations(t, p)
		})
	}

	// Approving from the bar decides like the form below.
	p := chromium.NewPage(t, browsertest.Phone)
	p.Navigate(link)
	p.Eval(`(document.querySelector("#end-of-content").scrollIntoView({block: "center", behavior: "instant"}), true)`, nil)
	p.WaitFor(`getComputedStyle(document.querySelector("#bar-approve")).visibility === "visible"`, 5*time.Second)
	p.ClickAndWait("#bar-approve")
	if got := p.TextContent("#notice"); got != "You approved it." {
		t.Fatalf("after the bar's Approve: %q\n%s", got, p.Text())
	}
	srv.waitFor(t, o.Key, "succeeded")
}

// saveScreenshotViewport saves what fits the first screen.
func saveScreenshotViewport(t *testing.T, p *browsertest.Page, name string) {
	t.Helper()
	saveScreenshotPNG(t, p.Screenshot(false), name)
}
