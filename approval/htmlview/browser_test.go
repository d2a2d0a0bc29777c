package htmlview_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval/htmlview"
	"github.com/countersign/countersign/internal/browsertest"
)

// The cascade is checked against a real renderer: each case is painted
// by headless Chromium twice, as written and with its text made
// invisible (wrapped in visibility:hidden, which keeps the layout), and
// the text counts as seen when the two pictures differ by more than a
// faint trace. Every hiding case must be unseen in Chromium and found
// hidden by Render; every visible case seen and not reported. (Skips
// when Chromium is not installed.)
func TestHidingCasesAgreeWithChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("paints about 90 pages in Chromium")
	}
	b := browsertest.Start(t)
	p := b.NewPage(t, browsertest.Viewport{Width: 640, Height: 360, DeviceScaleFactor: 1})
	seen := func(doc, text string) bool {
		t.Helper()
		p.Navigate("data:text/html;charset=utf-8;base64," + base64.StdEncoding.EncodeToString([]byte(doc)))
		before := p.Screenshot(true)
		var n int
		p.Eval(`(() => { let n = 0; const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT); const found = [];
			for (let t = w.nextNode(); t; t = w.nextNode()) { const v = t.nodeValue.trim().toLowerCase(), want = `+jsQuote(strings.ToLower(text))+`;
				if (v !== "" && (v.includes(want) || want.includes(v))) found.push(t); }
			for (const t of found) { const s = document.createElement("span"); s.style.setProperty("visibility", "hidden", "important");
				t.parentNode.insertBefore(s, t); s.appendChild(t); n++; }
			return n; })()`, &n)
		if n == 0 {
			t.Fatalf("text %q not found in the document", text)
		}
		return differs(t, before, p.Screenshot(true))
	}
	for _, c := range hidingCases {
		if c.name == "mso-hide" || c.name == "dark scheme display" {
			continue // only Outlook honours mso-hide; Chromium paints the light scheme
		}
		doc := `<!doctype html><html><body><p>Hello Ada, lunch on Friday?</p>` + c.html + `</body></html>`
		if strings.Contains(c.html, "<body") {
			doc = `<!doctype html><html>` + strings.Replace(c.html, "<body", "<body><p>Hello Ada, lunch on Friday?</p><div", 1) + `</html>`
		}
		if seen(doc, secret) {
			t.Errorf("%s: Chromium shows the text that the case means to hide", c.name)
		}
		if v := htmlview.Render(doc); !v.Hidden {
			t.Errorf("%s: Render did not find it hidden", c.name)
		}
	}
	for _, c := range visibleCases {
		v := htmlview.Render(c.html)
		text := strings.TrimSpace(v.Words)
		words := strings.Fields(text)
		if len(words) == 0 {
			t.Fatalf("%s: no words", c.name)
		}
		word := words[len(words)-1]
		if !seen(`<!doctype html><html>`+c.html+`</html>`, word) {
			t.Errorf("%s: Chromium does not show %q", c.name, word)
		}
		if v.Hidden {
			t.Errorf("%s: Render reported it hidden: %+v", c.name, v.HiddenText)
		}
	}
}

// differs reports whether two screenshots differ in more than a few
// pixels by more than a faint trace (48 of 255 in a channel).
func differs(t *testing.T, a, b []byte) bool {
	t.Helper()
	ia, err1 := png.Decode(bytes.NewReader(a))
	ib, err2 := png.Decode(bytes.NewReader(b))
	if err1 != nil || err2 != nil {
		t.Fatalf("decode screenshots: %v %v", err1, err2)
	}
	r := ia.Bounds().Intersect(ib.Bounds())
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if far(ia, ib, x, y) {
				n++
			}
		}
	}
	return n > 10
}

func far(a, b image.Image, x, y int) bool {
	r1, g1, b1, _ := a.At(x, y).RGBA()
	r2, g2, b2, _ := b.At(x, y).RGBA()
	d := func(p, q uint32) bool {
		if p > q {
			p, q = q, p
		}
		return (q-p)>>8 > 48
	}
	return d(r1, r2) || d(g1, g2) || d(b1, b2)
}

func jsQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}
