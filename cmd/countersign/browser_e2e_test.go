package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/browsertest"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// The approval page in a real headless Chromium at phone size: what a
// person sees, whether it fits and can be tapped, and that pressing the
// buttons decides, exactly once, and shows the outcome.
//
// Screenshots go to the test's temporary directory and, when
// COUNTERSIGN_SCREENSHOTS names a directory, there too
// (COUNTERSIGN_SCREENSHOTS=$PWD/docs/screenshots go test -run Browser ./cmd/countersign).

// browserEmailText is a realistic body with a long unbroken URL, which
// must wrap rather than widen the page on a phone.
const browserEmailText = "Hello Ms. Chen,\n\n" +
	"the November invoice (INV-2024-1187, EUR 1,240.00) is attached.\n" +
	"You can also pay online: https://billing.client.example/pay/INV-2024-1187?token=9f8e7d6c5b4a39281706f5e4d3c2b1a0\n\n" +
	"Best regards,\nSam\n"

const browserEmailSubject = "Your invoice for November"

func browserEmailBody(t *testing.T) string {
	b, err := json.Marshal(map[string]any{"action": "email.send", "input": map[string]any{
		"to": []string{"Mei Chen <client@client.example>"}, "subject": browserEmailSubject, "text": browserEmailText,
	}})
	must(t, err)
	return string(b)
}

// agentPreview is the preview the agent got, which the page must show verbatim.
type agentPreview struct {
	PayloadHash string `json:"payload_hash"`
	Preview     struct {
		Title    string   `json:"title"`
		Warnings []string `json:"warnings"`
		Fields   []struct {
			Name  string `json:"name"`
			Label string `json:"label"`
			Value string `json:"value"`
		} `json:"fields"`
	} `json:"preview"`
}

func (a agentPreview) field(name string) string {
	for _, f := range a.Preview.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// pageView is what the approval page shows, read from the live DOM
// (textContent: exactly the markup's text, before CSS text-transform).
type pageView struct {
	Headline, Title, Status, Notice, NoticeClass, Outcome string
	Hash, HashTitle                                       string
	Fields                                                map[string]string // label → value
	Badges                                                []string
	Buttons                                               map[string]pageButton // by id
	Form                                                  bool
	Refresh                                               string // the meta refresh, if any
	InnerWidth, ScrollWidth                               float64
	Overflowing                                           []string // elements past the right edge
	PreScrolls                                            bool     // a <pre> needs horizontal scrolling
	ReasonFontPx                                          float64
	ApproveBackground                                     string
}

type pageButton struct {
	Text          string
	Width, Height float64
}

const readPageJS = `(() => {
	const q = s => document.querySelector(s);
	const text = s => q(s) ? q(s).textContent : "";
	const v = {
		Headline: text("#headline"), Title: text("#title"), Status: text("#status"),
		Notice: text("#notice"), NoticeClass: q("#notice") ? q("#notice").className : "",
		Outcome: text("#outcome"),
		Hash: text("#meta code"), HashTitle: q("#meta code") ? q("#meta code").title : "",
		Fields: {}, Badges: [...document.querySelectorAll(".badge")].map(b => b.textContent),
		Buttons: {}, Form: !!q("form#decide"),
		Refresh: q('meta[http-equiv="refresh"]') ? q('meta[http-equiv="refresh"]').content : "",
		InnerWidth: window.innerWidth, ScrollWidth: document.documentElement.scrollWidth,
		Overflowing: [], PreScrolls: [...document.querySelectorAll("pre")].some(p => p.scrollWidth > p.clientWidth),
		ReasonFontPx: q("#reason") ? parseFloat(getComputedStyle(q("#reason")).fontSize) : 0,
		ApproveBackground: q("#approve") ? getComputedStyle(q("#approve")).backgroundColor : "",
	};
	for (const dt of document.querySelectorAll("#fields dt")) {
		const value = dt.nextElementSibling.querySelector("pre.agent, span.agent");
		v.Fields[dt.textContent] = value ? value.textContent : "";
	}
	for (const b of document.querySelectorAll("form#decide button")) {
		const r = b.getBoundingClientRect();
		v.Buttons[b.id] = {Text: b.textContent, Width: r.width, Height: r.height};
	}
	for (const el of document.body.querySelectorAll("*")) {
		const r = el.getBoundingClientRect();
		if (r.right > window.innerWidth + 0.5 || r.left < -0.5)
			v.Overflowing.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : "") + " right=" + r.right);
	}
	return v;
})()`

func readPage(p *browsertest.Page) pageView {
	var v pageView
	p.Eval(readPageJS, &v)
	return v
}

// checkPhoneLayout: nothing wider than the phone, tap targets at least
// 44 CSS px (Apple HIG; Material asks 48), inputs at 16px or more (smaller
// makes iOS Safari zoom in on focus), and the stylesheet applied under
// the page's CSP.
func checkPhoneLayout(t *testing.T, v pageView) {
	t.Helper()
	if v.InnerWidth != float64(browsertest.Phone.Width) {
		t.Errorf("window.innerWidth %v, want %d (is the viewport meta tag there?)", v.InnerWidth, browsertest.Phone.Width)
	}
	if v.ScrollWidth > v.InnerWidth {
		t.Errorf("horizontal overflow on a phone: scrollWidth %v > innerWidth %v", v.ScrollWidth, v.InnerWidth)
	}
	if len(v.Overflowing) > 0 {
		t.Errorf("elements past the edge of the screen: %v", v.Overflowing)
	}
	if v.PreScrolls {
		t.Error("the email text needs horizontal scrolling")
	}
	if v.Form {
		for _, id := range []string{"approve", "reject"} {
			b, ok := v.Buttons[id]
			if !ok {
				t.Errorf("no %s button", id)
				continue
			}
			if b.Height < 44 || b.Width < 44 {
				t.Errorf("%s button is %.0f×%.0f CSS px, want at least 44×44", id, b.Width, b.Height)
			}
		}
		if v.ReasonFontPx < 16 {
			t.Errorf("reason field font %vpx: below 16px phones zoom in on focus", v.ReasonFontPx)
		}
		if v.ApproveBackground != "rgb(19, 115, 51)" {
			t.Errorf("approve button background %q: the stylesheet did not apply", v.ApproveBackground)
		}
	}
}

// checkDecided: once the person has pressed a button, the page thanks
// them and offers no second decision (pressing again could only fail).
func checkDecided(t *testing.T, v pageView) {
	t.Helper()
	if v.Form || len(v.Buttons) > 0 {
		t.Errorf("after deciding, the page still shows the Approve/Reject form (buttons %v) under %q", v.Buttons, v.Notice)
	}
}

// linkToken keeps approval links out of test output.
var linkToken = regexp.MustCompile(`/a/[A-Za-z0-9_.-]+`)

// checkNoCSPViolations fails on CSP violations and script errors the page
// reported; anything else it logged is shown with -v.
func checkNoCSPViolations(t *testing.T, p *browsertest.Page) {
	t.Helper()
	for _, e := range p.Logs() {
		switch {
		case strings.Contains(e.Text, "Content Security Policy") || strings.Contains(e.Text, "ContentSecurityPolicy"),
			e.Source == "exception", e.Source == "security" && e.Level == "error":
			t.Errorf("page reported: %s", linkToken.ReplaceAllString(e.String(), "/a/…"))
		default:
			t.Logf("page log: %s", linkToken.ReplaceAllString(e.String(), "/a/…"))
		}
	}
}

// saveScreenshot saves a full-page PNG in the test's temporary directory
// and in $COUNTERSIGN_SCREENSHOTS when set.
func saveScreenshot(t *testing.T, p *browsertest.Page, name string) {
	t.Helper()
	// A full-page capture would paint the fixed decision bar in the middle
	// of the page; put it at the end for the picture.
	p.Eval(`(() => { const b = document.querySelector("#bar"); if (b) b.style.position = "static"; return true })()`, nil)
	saveScreenshotPNG(t, p.Screenshot(true), name)
	p.Eval(`(() => { const b = document.querySelector("#bar"); if (b) b.style.position = ""; return true })()`, nil)
}

func saveScreenshotPNG(t *testing.T, png []byte, name string) {
	t.Helper()
	dirs := []string{t.TempDir()}
	if d := os.Getenv("COUNTERSIGN_SCREENSHOTS"); d != "" {
		must(t, os.MkdirAll(d, 0o755))
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		path := filepath.Join(d, name)
		must(t, os.WriteFile(path, png, 0o644))
		t.Logf("screenshot %s", path)
	}
}

func TestBrowserApprovalPage(t *testing.T) {
	chromium := browsertest.Start(t)

	// open starts a service, sends an email for approval and opens grace's
	// link in a fresh phone-sized tab.
	open := func(t *testing.T) (*testService, *smtptest.Server, op, agentPreview, string, *browsertest.Page) {
		smtp := smtptest.Start(t, smtptest.Options{})
		srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
		o := srv.prepareSend(t, browserEmailBody(t))
		_, b := srv.call(t, "GET", "/v1/operations/"+o.Key, srv.APIKey, "")
		prev := decode[agentPreview](t, b)
		// The link is on the service's own origin (COUNTERSIGN_PUBLIC_URL
		// defaults to the listen address), so the CSRF cookie set by the
		// page and the Origin of the form post both match.
		link := approvalLink(t, smtp, "grace@example.com")
		p := chromium.NewPage(t, browsertest.Phone)
		p.Navigate(link)
		if r := p.LastResponse(); r.Status != 200 {
			t.Fatalf("approval page: HTTP %d\n%s", r.Status, p.Text())
		}
		return srv, smtp, o, prev, link, p
	}

	t.Run("approve", func(t *testing.T) {
		srv, smtp, o, prev, link, p := open(t)

		v := readPage(p)
		if v.Headline != "Approve this action?" || !v.Form {
			t.Fatalf("not the decision page: %+v\n%s", v, p.Text())
		}
		if v.Title != prev.Preview.Title || !strings.Contains(v.Title, "client@client.example") {
			t.Errorf("title %q, agent saw %q", v.Title, prev.Preview.Title)
		}
		if v.Status != "Waiting for approval" {
			t.Errorf("status %q", v.Status)
		}
		// The exact email, character for character.
		if v.Fields["Text"] != browserEmailText || v.Fields["Text"] != prev.field("text") {
			t.Errorf("email text on the page:\n%q\nsent:\n%q\nagent saw:\n%q", v.Fields["Text"], browserEmailText, prev.field("text"))
		}
		if v.Fields["Subject"] != browserEmailSubject || v.Fields["To"] != prev.field("to") || v.Fields["From"] == "" {
			t.Errorf("fields %q, agent saw %+v", v.Fields, prev.Preview.Fields)
		}
		if want := prev.PayloadHash[:len("sha256:")+12]; v.Hash != want || v.HashTitle != prev.PayloadHash {
			t.Errorf("payload hash shown %q (title %q), want %q (%q)", v.Hash, v.HashTitle, want, prev.PayloadHash)
		}
		if len(v.Badges) == 0 || !strings.HasPrefix(strings.ToLower(v.Badges[0]), "irreversible") || !p.Exists(".badge.irreversible") {
			t.Errorf("warnings %q, want the irreversible badge first", v.Badges)
		}
		if v.Buttons["approve"].Text != "Approve" || v.Buttons["reject"].Text != "Reject" {
			t.Errorf("buttons %+v", v.Buttons)
		}
		if text := p.Text(); !strings.Contains(text, "Grace Park") || !strings.Contains(text, "support-agent") {
			t.Errorf("page does not say who decides and who asked:\n%s", text)
		}
		// While the form is shown the page must hold still: a reload wipes a
		// reason being typed (and the person's place on the page).
		if v.Refresh != "" {
			t.Errorf("the decision page reloads itself (meta refresh %q): a reason being typed is lost", v.Refresh)
		}
		checkPhoneLayout(t, v)
		saveScreenshot(t, p, "approval-phone.png")
		// On the first screen: what will happen, and the decision bar.
		if what, bar := p.Box("#what"), p.Box("#bar"); what.Y < 0 || what.Y+what.Height > float64(browsertest.Phone.Height) ||
			bar.Y+bar.Height > float64(browsertest.Phone.Height)+1 {
			t.Errorf("first screen: what %+v, bar %+v", what, bar)
		}
		desk := chromium.NewPage(t, browsertest.Desktop)
		desk.Navigate(link)
		saveScreenshot(t, desk, "approval-desktop.png")
		checkNoCSPViolations(t, desk)
		if cur := srv.waitFor(t, o.Key, "pending_approval"); len(cur.Approval.Approvals) != 0 {
			t.Fatal("showing the page decided something")
		}

		// The pending page refreshes itself every few seconds: load it
		// afresh so the click lands on the page just read, not mid-reload.
		p.Navigate(link)
		p.ClickAndWait("#approve")
		if r := p.LastResponse(); r.Status != 200 {
			t.Errorf("after approving: HTTP %d", r.Status)
		}
		v = readPage(p)
		if v.Notice != "You approved it." || v.Headline != "Thank you" {
			t.Fatalf("after approving: %+v\n%s", v, p.Text())
		}
		checkDecided(t, v)
		checkPhoneLayout(t, v)

		// The page follows the operation (meta refresh, no script) to its outcome.
		p.WaitFor(`(document.querySelector("#status") || {}).textContent === "Done"`, 20*time.Second)
		v = readPage(p)
		if !strings.Contains(v.Outcome, "Approved by Grace Park (by email). Done: it ran successfully.") || v.Refresh != "" || v.Form {
			t.Errorf("final page: %+v\n%s", v, p.Text())
		}
		checkPhoneLayout(t, v)
		saveScreenshot(t, p, "approved-phone.png")
		checkNoCSPViolations(t, p)

		// The agent sees it succeeded; exactly one email reached the client,
		// with the text the page showed.
		done := srv.waitFor(t, o.Key, "succeeded")
		if len(done.Approval.Approvals) != 1 || done.Approval.Approvals[0].Approver != "grace" || done.Approval.Approvals[0].Via != "email" {
			t.Errorf("approvals %+v", done.Approval.Approvals)
		}
		msgs := sentTo(smtp, "client@client.example")
		if len(msgs) != 1 {
			t.Fatalf("%d emails reached the client, want 1", len(msgs))
		}
		sent, err := msgs[0].Parse()
		must(t, err)
		if sent.Text != prev.field("text") || sent.Subject != browserEmailSubject {
			t.Errorf("sent %q %q, the page showed %q", sent.Subject, sent.Text, prev.field("text"))
		}
	})

	t.Run("reject with reason", func(t *testing.T) {
		srv, smtp, o, _, link, p := open(t)
		const reason = "Wrong amount — it's EUR 1,420, not 1,240. <Fix> & resend."

		p.Navigate(link) // a fresh page: see "approve"
		p.Type("#reason", reason)
		var typed string
		p.Eval(`document.querySelector("#reason").value`, &typed)
		if typed != reason {
			t.Fatalf("reason field holds %q", typed)
		}
		p.ClickAndWait("#reject")
		v := readPage(p)
		if v.Notice != "You rejected it. Nothing will be done." || !strings.Contains(v.NoticeClass, "bad") {
			t.Fatalf("after rejecting: %+v\n%s", v, p.Text())
		}
		checkDecided(t, v)
		if v.Status != "Rejected" || !strings.Contains(v.Outcome, "Reason: "+reason) || v.Refresh != "" {
			t.Errorf("after rejecting: status %q outcome %q refresh %q", v.Status, v.Outcome, v.Refresh)
		}
		checkPhoneLayout(t, v)
		checkNoCSPViolations(t, p)

		cur := srv.waitFor(t, o.Key, "rejected")
		if r := cur.Approval.Rejection; r == nil || r.Reason != reason || r.Approver != "grace" || !strings.Contains(cur.NextStep, "Wrong amount") {
			t.Fatalf("the agent sees rejection %+v, next step %q", cur.Approval.Rejection, cur.NextStep)
		}
		if n := len(sentTo(smtp, "client@client.example")); n != 0 {
			t.Fatalf("a rejected email was sent (%d)", n)
		}
	})
}
