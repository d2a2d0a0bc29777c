package main

import (
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testing/browsertest"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// TestBrowserPhoneLeadsWithWhatChanges (issue 24, point 8): on a
// 390×844 phone, the first screen of an approval page shows what
// changes. For an HTTP write, the top of the before/after table is within
// the first viewport, above the method, URL and body; the page speaks of
// the record not having changed since it was read, not of If-Match, and
// keeps the exact header lower down in a details element. For an email,
// the subject and the start of the text are on the first screen.
func TestBrowserPhoneLeadsWithWhatChanges(t *testing.T) {
	chromium := browsertest.Start(t)

	t.Run("http write", func(t *testing.T) {
		target := &e2eTarget{doc: map[string]any{"title": "Standup", "start": "09:00", "end": "09:15"}}
		ts := httptest.NewServer(target)
		t.Cleanup(ts.Close)
		cfg, err := os.ReadFile(httpreqConfig(t, ts.URL))
		must(t, err)
		srv := startService(t, serviceOpts{Config: string(cfg), Env: map[string]string{"CAL_TOKEN": httpreqCred}})
		srv.APIKey = httpreqAPIKey
		o := srv.prepareSend(t, `{"action":"http.request","input":{"target":"calendar","method":"PATCH","path":"/events/7","body":{"title":"Retro","start":"10:00"}}}`)
		p := chromium.NewPage(t, browsertest.Phone)
		p.Navigate(srv.consoleLink(t, o.Key, "grace"))
		if r := p.LastResponse(); r.Status != 200 {
			t.Fatalf("approval page: HTTP %d\n%s", r.Status, p.Text())
		}
		saveScreenshotPNG(t, p.Screenshot(false), "approval-http-phone-first-screen.png")
		// The table's head and first row above the decision bar, which
		// stays at the bottom of the screen.
		diff, bar := p.Box("#diff"), p.Box("#bar")
		if diff.Y < 0 || diff.Y+80 > bar.Y || bar.Y > float64(browsertest.Phone.Height) {
			t.Errorf("the before/after table starts at y=%v, not above the decision bar (y=%v) on the first screen\n%s", diff.Y, bar.Y, p.Text())
		}
		if fields := p.Box("#fields"); fields.Y < diff.Y {
			t.Errorf("the details (y=%v) come before what changes (y=%v)", fields.Y, diff.Y)
		}
		checkPhoneLayout(t, readPage(p))
		var visible string
		p.Eval(`(() => { const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT); let s = "";
			for (let n; (n = w.nextNode());) { const e = n.parentElement; if (e.closest("details:not([open])")) continue;
				if (getComputedStyle(e).display === "none") continue; s += n.textContent + " "; } return s })()`, &visible)
		if strings.Contains(visible, "If-Match") || strings.Contains(visible, "ETag") {
			t.Errorf("the page shows HTTP jargon outside its technical details:\n%s", visible)
		}
		if !strings.Contains(visible, "only if the record has not changed since it was read") {
			t.Errorf("the page does not say in plain words when it runs:\n%s", visible)
		}
		if tech := p.TextContent("details#technical"); !strings.Contains(tech, `If-Match: "0"`) {
			t.Errorf("the exact precondition is not kept in the technical details: %q", tech)
		}
		saveScreenshot(t, p, "approval-http-phone.png")
		checkNoCSPViolations(t, p)
	})

	t.Run("email", func(t *testing.T) {
		smtp := smtptest.Start(t, smtptest.Options{})
		srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
		srv.prepareSend(t, browserEmailBody(t))
		p := chromium.NewPage(t, browsertest.Phone)
		p.Navigate(approvalLink(t, smtp, "grace@example.com"))
		saveScreenshotPNG(t, p.Screenshot(false), "approval-email-phone-first-screen.png")
		// To, the subject and the first line of the text above the bar.
		bar := p.Box("#bar")
		for _, f := range []struct{ sel, what string }{
			{`#fields dt[data-name="to"] + dd .agent`, "To"},
			{`#fields dt[data-name="subject"] + dd .agent`, "Subject"},
			{`#fields dt[data-name="text"] + dd pre`, "the text's first line"},
		} {
			if b := p.Box(f.sel); b.Y < 0 || b.Y+40 > bar.Y {
				t.Errorf("%s starts at y=%v, not on the first screen above the bar (y=%v)\n%s", f.what, b.Y, bar.Y, p.Text())
			}
		}
		if from, text := p.Box(`#fields dt[data-name="from"]`), p.Box(`#fields dt[data-name="text"]`); from.Y < text.Y {
			t.Errorf("From (y=%v), which the agent cannot choose, leads before the text (y=%v)", from.Y, text.Y)
		}
	})
}
