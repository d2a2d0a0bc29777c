package htmlview_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/approval/htmlview"
)

func TestRender(t *testing.T) {
	v := htmlview.Render(`<html><head><title>T</title><style>body{background:url(https://track.example/bg.png)}</style>` +
		`<link rel=stylesheet href="https://track.example/s.css"></head><body>` +
		`<p>Please wire <b>$50,000</b> to <a href="https://evil.example/pay">our account</a>.</p>` +
		`<img src="https://track.example/pixel.gif" alt="logo"><script>alert(1)</script>` +
		`<div style="display:none">Lunch on Friday?</div><form action="https://evil.example/f"><input name=p></form>` +
		`<a href="javascript:alert(2)">click</a></body></html>`)
	for _, bad := range []string{"<script", "alert(1)", "<img", "href=", "style=", "<style", "<link", "<form", "<input", "track.example"} {
		if strings.Contains(v.Doc, bad) {
			t.Errorf("the frame document holds %q:\n%s", bad, v.Doc)
		}
	}
	for _, want := range []string{"Please wire", "$50,000", "our account [1]", "[image 1: logo]", "Lunch on Friday?", "click [2]"} {
		if !strings.Contains(v.Doc, want) || !strings.Contains(v.Text, want) {
			t.Errorf("%q missing from the document or the text:\n%s\n%s", want, v.Doc, v.Text)
		}
	}
	if len(v.Links) != 2 || v.Links[0] != (htmlview.Link{N: 1, Text: "our account", Href: "https://evil.example/pay"}) ||
		v.Links[1].Href != "javascript:alert(2)" {
		t.Errorf("links %+v", v.Links)
	}
	if strings.Join(v.Remote, " ") != "https://track.example/bg.png https://track.example/s.css https://track.example/pixel.gif" {
		t.Errorf("remote %q", v.Remote)
	}
	if !v.Hidden {
		t.Error("display:none not noticed")
	}
	if strings.Contains(v.Words, "[1]") || strings.Contains(v.Words, "image") {
		t.Errorf("words hold the markers: %q", v.Words)
	}
}

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		name, html, text string
		differs          bool
	}{
		{"the HTML asks for money the text does not mention", `<p>Please wire $50,000</p>`, "Lunch on Friday?", true},
		{"the text asks for money the HTML does not mention", `<p>Lunch on <i>Friday</i>?</p>`, "Lunch on Friday? Please wire $50,000 today.", true},
		{"another amount", `<p>Please pay $5,000 by Friday.</p>`, "Please pay $50,000 by Friday.", true},
		{"same words, other markup", `<h1>Hello&nbsp;Ada,</h1><p>your <b>invoice</b> is attached.</p>`, "Hello Ada,\nyour invoice is attached.\n", false},
		{"numbers written differently", `<p>Total: 1.240,00 EUR</p>`, "Total: 1240,00 EUR", false},
		{"a link spelled out in the text", `<p>Pay <a href="https://pay.example/inv/1187">online</a>.</p>`, "Pay online: https://pay.example/inv/1187", false},
		{"a few extra words in a long HTML", `<p>View in browser</p><p>` + strings.Repeat("Dear Ada, the meeting moves to the big room on the third floor. ", 3) + `</p>`,
			strings.Repeat("Dear Ada, the meeting moves to the big room on the third floor. ", 3), false},
		{"full-width letters are the same word", `<p>ｗｉｒｅ now</p>`, "wire now", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := htmlview.Compare(htmlview.Render(c.html), c.text)
			if m.Differs != c.differs {
				t.Errorf("Differs = %v, want %v (only HTML %q, only text %q)", m.Differs, c.differs, m.OnlyHTML, m.OnlyText)
			}
		})
	}
}
