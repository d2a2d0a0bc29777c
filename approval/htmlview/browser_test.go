package htmlview_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval/htmlview"
	"github.com/countersign/countersign/internal/testing/browsertest"
)

// The cascade is checked against a real renderer: every case is painted
// by headless Chromium (each in its own frame of one page) twice, as
// written and with its text made invisible (wrapped in
// visibility:hidden, which keeps the layout), and the text counts as
// seen when the two pictures of its frame differ by more than a faint
// trace. Every hiding case must be unseen in Chromium and found
// hidden by Render; every visible case seen and not reported. (Skips
// when Chromium is not installed.)
func TestHidingCasesAgreeWithChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("paints every case in Chromium")
	}
	type item struct {
		name, doc, text string
		hidden          bool
	}
	var items []item
	for _, c := range hidingCases {
		if c.name == "mso-hide" || c.name == "dark scheme display" {
			continue // only Outlook honours mso-hide; Chromium paints the light scheme
		}
		doc := `<!doctype html><html><body><p>Hello Ada, lunch on Friday?</p>` + c.html + `</body></html>`
		items = append(items, item{c.name, doc, secret, true})
	}
	for _, c := range visibleCases {
		words := strings.Fields(htmlview.Render(c.html).Words)
		if len(words) == 0 {
			t.Fatalf("%s: no words", c.name)
		}
		items = append(items, item{c.name, `<!doctype html><html>` + c.html + `</html>`, words[len(words)-1], false})
	}
	// One page, each case in its own frame (its own document and style
	// sheet), painted twice: as written, and with each case's text
	// wrapped in visibility:hidden (which keeps the layout).
	const frameH = 300
	var page strings.Builder
	page.WriteString(`<!doctype html><html><body style="margin:0">`)
	for _, it := range items {
		fmt.Fprintf(&page, `<iframe style="display:block;border:0;margin:0 0 20px 0;width:600px;height:%dpx" srcdoc="%s"></iframe>`, frameH, html.EscapeString(it.doc))
	}
	page.WriteString(`</body></html>`)
	b := browsertest.Start(t)
	p := b.NewPage(t, browsertest.Viewport{Width: 640, Height: 480, DeviceScaleFactor: 1})
	p.Navigate("data:text/html;charset=utf-8;base64," + base64.StdEncoding.EncodeToString([]byte(page.String())))
	before := p.Screenshot(true)
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = strings.ToLower(it.text)
	}
	var wrapped []int
	p.Eval(`(() => { const texts = `+jsArray(texts)+`; const frames = document.querySelectorAll("iframe"); const counts = [];
		frames.forEach((f, i) => { const d = f.contentDocument; let n = 0; const found = [];
			const w = d.createTreeWalker(d.body || d.documentElement, NodeFilter.SHOW_TEXT);
			for (let t = w.nextNode(); t; t = w.nextNode()) { const v = t.nodeValue.trim().toLowerCase();
				if (v !== "" && (v.includes(texts[i]) || texts[i].includes(v))) found.push(t); }
			for (const t of found) { const s = d.createElement("span"); s.style.setProperty("visibility", "hidden", "important");
				t.parentNode.insertBefore(s, t); s.appendChild(t); n++; }
			counts.push(n); });
		return counts; })()`, &wrapped)
	after := p.Screenshot(true)
	ia, ib := decode(t, before), decode(t, after)
	for i, it := range items {
		if i >= len(wrapped) || wrapped[i] == 0 {
			t.Errorf("%s: text %q not found in its frame", it.name, it.text)
			continue
		}
		seen := differs(ia, ib, image.Rect(0, i*(frameH+20), 600, i*(frameH+20)+frameH))
		v := htmlview.Render(it.doc)
		switch {
		case it.hidden && seen:
			t.Errorf("%s: Chromium shows the text that the case means to hide", it.name)
		case it.hidden && !v.Hidden:
			t.Errorf("%s: Render did not find it hidden", it.name)
		case !it.hidden && !seen:
			t.Errorf("%s: Chromium does not show %q", it.name, it.text)
		case !it.hidden && v.Hidden:
			t.Errorf("%s: Render reported it hidden: %+v", it.name, v.HiddenText)
		}
	}
}

func decode(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode screenshot: %v", err)
	}
	return img
}

func jsArray(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = jsQuote(s)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// differs reports whether two screenshots differ within r in more than
// a few pixels by more than a faint trace (48 of 255 in a channel).
func differs(a, b image.Image, r image.Rectangle) bool {
	r = r.Intersect(a.Bounds()).Intersect(b.Bounds())
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if far(a, b, x, y) {
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
