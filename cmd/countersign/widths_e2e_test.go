package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/browsertest"
	"github.com/countersign/countersign/internal/testing/oidctest"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// widthsJS measures a page as laid out: the document's overflow past the
// viewport, and the narrowest cell of each table column (a column that
// wraps two letters a line is a broken table, not a narrow screen).
const widthsJS = `(() => {
	const cols = {};
	for (const table of document.querySelectorAll("table")) {
		const heads = [...table.querySelectorAll("thead th")].map(th => th.textContent.trim());
		for (const tr of table.querySelectorAll("tbody tr")) {
			[...tr.children].forEach((td, i) => {
				if (td.colSpan > 1 || getComputedStyle(td).display === "none") return;
				const w = td.getBoundingClientRect().width, name = heads[i] || String(i);
				if (!(name in cols) || w < cols[name]) cols[name] = w;
			});
		}
	}
	return {Inner: window.innerWidth, Scroll: document.documentElement.scrollWidth, Columns: cols};
})()`

type pageWidths struct {
	Inner, Scroll float64
	Columns       map[string]float64
}

// TestBrowserPagesFitEveryWidth opens the console's list and one
// operation, and the inbox, signed in, at widths from 320 to 1920 CSS px:
// no page is wider than the window, and where a table shows its columns
// (from 768 px), no column of it is squeezed under 4.5 em — the console's
// "What" column once wrapped two or three letters a line at 1280 px.
func TestBrowserPagesFitEveryWidth(t *testing.T) {
	chromium := browsertest.Start(t)
	idp := oidctest.Start(t, "countersign", "idp-secret")
	smtp := smtptest.Start(t, smtptest.Options{})
	srv, base := localhostService(t, signinConfig(idp.Issuer(), ""), map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()})
	idp.AllowRedirects(base + "/signin/callback")
	long := strings.Replace(emailBody, `"subject": "`, `"subject": "A rather long subject line that an agent wrote for the quarterly renewal of `, 1)
	var keys []string
	for _, body := range []string{emailBody, long} {
		keys = append(keys, srv.prepareSend(t, body).Key)
	}

	pages := []struct{ who, email, path, ready string }{
		{"oncall", "oncall@example.com", "/console", `document.querySelector("table.ops")`},
		{"oncall", "oncall@example.com", "/console/" + keys[1], `document.querySelector("#headline")`},
		{"grace", "grace@example.com", "/inbox", `document.title.startsWith("Your inbox")`},
	}
	for _, pg := range pages {
		idp.SignIn(map[string]any{"sub": "u-" + pg.who, "email": pg.email, "email_verified": true, "name": pg.who})
		p := chromium.NewPage(t, browsertest.Desktop)
		p.Navigate(base + pg.path)
		p.WaitFor(pg.ready, 15*time.Second)
		for _, w := range []int{320, 390, 768, 1024, 1280, 1920} {
			mobile := w < 768
			p.SetViewport(browsertest.Viewport{Width: w, Height: 900, Mobile: mobile})
			p.Navigate(base + pg.path)
			p.WaitFor(pg.ready, 15*time.Second)
			var got pageWidths
			p.Eval(widthsJS, &got)
			at := fmt.Sprintf("%s at %d px", pg.path, w)
			if got.Scroll > got.Inner+0.5 {
				t.Errorf("%s: the page is %v px wide in a %v px window", at, got.Scroll, got.Inner)
			}
			if w >= 768 && pg.path == "/console" && got.Columns["What"] == 0 {
				t.Errorf("%s: no \"What\" column measured: %v", at, got.Columns)
			}
			if w >= 768 {
				for col, min := range got.Columns {
					if min < 4.5*16 {
						t.Errorf("%s: column %q is squeezed to %.0f px", at, col, min)
					}
				}
			}
		}
	}
}
