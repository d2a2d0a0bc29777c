package htmlview_test

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval/htmlview"
)

// Text hidden by styling was not noticed unless it used display:none and
// a few other words (issue 19 class 4). Visibility is now computed per
// text node from the document's own styles, as the recipient's program
// would paint it: every way of hiding below hides the secret, and the
// visible text is left alone.
func TestHiddenTextFoundWhateverTheTechnique(t *testing.T) {
	for _, c := range hidingCases {
		t.Run(c.name, func(t *testing.T) {
			v := htmlview.Render(`<p>Hello Ada, lunch on Friday?</p>` + c.html)
			if !v.Hidden || len(v.HiddenText) == 0 {
				t.Fatalf("not found hidden: %+v", v.HiddenText)
			}
			if !strings.Contains(v.HiddenText[0].Text, secret) || v.HiddenText[0].Why == "" {
				t.Errorf("hidden %+v", v.HiddenText)
			}
			if strings.Contains(v.Words, "90000") {
				t.Errorf("hidden words counted as visible: %q", v.Words)
			}
			if !strings.Contains(v.Text, "[hidden: "+secret+"]") || !strings.Contains(v.Doc, "[hidden: "+secret+"]") {
				t.Errorf("hidden text not marked:\n%s\n%s", v.Text, v.Doc)
			}
			if !strings.Contains(v.Words, "lunch on friday") && !strings.Contains(strings.ToLower(v.Words), "lunch on friday") {
				t.Errorf("visible words %q", v.Words)
			}
		})
	}
}

// What an ordinary newsletter does is not hiding: dark text on light
// boxes, light text on dark buttons, small print, visibility restored by
// a descendant, a font-size reset inside a zero-size spacer.
func TestVisibleStylingIsNotHiding(t *testing.T) {
	for _, c := range visibleCases {
		t.Run(c.name, func(t *testing.T) {
			v := htmlview.Render(c.html)
			if v.Hidden {
				t.Errorf("reported hidden: %+v", v.HiddenText)
			}
		})
	}
}

// Text that some mail programs show but the sanitized document does not:
// Outlook's conditional comments, text a style rule adds, SVG text.
func TestTextShownElsewhereIsListed(t *testing.T) {
	for _, c := range []struct{ name, html, want string }{
		{"conditional comment", `<p>Hello</p><!--[if mso]><p>Wire 90000 EUR to DE99</p><![endif]-->`, "Wire 90000 EUR to DE99"},
		{"content property", `<style>p.n::after{content:"Wire 90000 EUR"}</style><p class=n>Hello</p>`, "Wire 90000 EUR"},
		{"svg text", `<p>Hello</p><svg><text x=0 y=10>Wire 90000 EUR</text></svg>`, "Wire 90000 EUR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := htmlview.Render(c.html)
			if len(v.Unshown) == 0 || !strings.Contains(v.Unshown[0], c.want) {
				t.Errorf("unshown %q", v.Unshown)
			}
		})
	}
}

// An SVG logo with a title (a tooltip) shows no text.
func TestSVGTitleIsNotText(t *testing.T) {
	if v := htmlview.Render(`<p>Hi</p><svg><title>Company logo</title><desc>d</desc><rect/></svg>`); len(v.Unshown) > 0 {
		t.Errorf("unshown %q", v.Unshown)
	}
}

// Hidden text that repeats the text part while the visible HTML says
// something else: the words compared are the visible ones, so the parts
// differ (issue 19).
func TestRemoteStyleSheetCountsAsHiding(t *testing.T) {
	for _, h := range []string{`<link rel="stylesheet" href="https://evil.example/s.css"><p>Hi</p>`,
		`<style>@import "https://evil.example/s.css";</style><p>Hi</p>`} {
		if v := htmlview.Render(h); !v.Hidden || len(v.HiddenText) == 0 || !strings.Contains(v.HiddenText[0].Why, "remote style sheet") {
			t.Errorf("%s: %+v", h, v.HiddenText)
		}
	}
}

func TestHiddenCopyOfTheTextPartDoesNotCount(t *testing.T) {
	text := "Hello Ada, lunch on Friday at noon in the usual place? Best, Grace\n"
	html := `<p>Please wire 90000 EUR to DE99 today.</p><div style="color:#fff;font-size:1px">` + text + `</div>`
	m := htmlview.Compare(htmlview.Render(html), text)
	if !m.Differs {
		t.Errorf("hidden copy counted: only HTML %q only text %q", m.OnlyHTML, m.OnlyText)
	}
}

type styleCase struct{ name, html string }

// secret is the text each hiding case hides.
const secret = "Wire 90000 EUR to DE99"

// hidingCases each hide secret from the reader (checked against Chromium
// in TestHidingCasesAgreeWithChromium).
var hidingCases = []styleCase{
	{"indent past the right edge", `<div style="width:300px;text-indent:100%;white-space:nowrap;overflow:hidden">` + secret + `</div>`},
	{"height zero overflow hidden", `<div style="height:0;overflow:hidden">` + secret + `</div>`},
	{"almost transparent colour", `<p style="color:rgba(255,0,0,0.02)">` + secret + `</p>`},
	{"same colour and background", `<p style="color:white;background-color:white">` + secret + `</p>`},
	{"grey page, grey text", `<body style="background:#f4f4f4"><p style="color:#f5f5f5">` + secret + `</p></body>`},
	{"screen-reader only", `<div style="position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(1px,1px,1px,1px)">` + secret + `</div>`},
	{"scale nearly zero", `<div style="transform:scale(0.01)">` + secret + `</div>`},
	{"hidden table", `<table style="display:none !important"><tr><td>` + secret + `</td></tr></table>`},
	{"white on white", `<p style="color:#fff">` + secret + `</p>`},
	{"near-white on white", `<p style="color:rgb(250,250,250)">` + secret + `</p>`},
	{"named colour like the background", `<div style="background:navy"><span style="color:#000081">` + secret + `</span></div>`},
	{"font colour attribute on a table colour", `<table bgcolor="#336699"><tr><td><font color="336699">` + secret + `</font></td></tr></table>`},
	{"font colour on a dark box", `<div style="background:black"><font color="#010101">` + secret + `</font></div>`},
	{"hsl like the background", `<div style="background-color:hsl(0,0%,100%)"><p style="color:hsla(0,0%,99%,1)">` + secret + `</p></div>`},
	{"transparent colour", `<p style="color:rgba(0,0,0,0)">` + secret + `</p>`},
	{"transparent fill", `<p style="-webkit-text-fill-color:transparent">` + secret + `</p>`},
	{"class rule in a style sheet", `<style>.a{color:#fefefe}</style><p class=a>` + secret + `</p>`},
	{"id rule with important", `<style>#x{display:none!important}</style><p id=x style="display:block">` + secret + `</p>`},
	{"descendant selector", `<style>div p span{visibility:hidden}</style><div><p><span>` + secret + `</span></p></div>`},
	{"media query", `<style>@media screen{.m{display:none}}</style><div class=m>` + secret + `</div>`},
	{"attribute selector", `<style>[data-x="1"]{opacity:0}</style><div data-x=1>` + secret + `</div>`},
	{"off-screen absolute", `<div style="position:absolute;left:-9999px">` + secret + `</div>`},
	{"off-screen top in em", `<div style="position:fixed;top:-100em">` + secret + `</div>`},
	{"text-indent", `<p style="text-indent:-10000px;overflow:hidden">` + secret + `</p>`},
	{"negative margin", `<p style="margin-left:-5000px">` + secret + `</p>`},
	{"tiny font", `<p style="font-size:1px">` + secret + `</p>`},
	{"font shorthand", `<p style="font:0/0 a">` + secret + `</p>`},
	{"relative tiny font", `<div style="font-size:1px"><p style="font-size:100%">` + secret + `</p></div>`},
	{"opacity layers", `<div style="opacity:.3"><p style="opacity:.2">` + secret + `</p></div>`},
	{"filter opacity", `<p style="filter:opacity(0)">` + secret + `</p>`},
	{"scale zero", `<p style="transform:scale(0)">` + secret + `</p>`},
	{"translate away", `<p style="transform:translateX(-9999px)">` + secret + `</p>`},
	{"clip rect", `<p style="position:absolute;clip:rect(0 0 0 0)">` + secret + `</p>`},
	{"clip-path", `<p style="clip-path:inset(50%)">` + secret + `</p>`},
	{"zero box", `<div style="width:0;height:0;overflow:hidden">` + secret + `</div>`},
	{"one pixel box", `<div style="width:1px;height:1px;overflow:hidden;position:absolute">` + secret + `</div>`},
	{"max-height zero", `<div style="max-height:0;overflow:hidden">` + secret + `</div>`},
	{"mso-hide", `<div style="mso-hide:all">` + secret + `</div>`},
	{"hidden attribute", `<div hidden>` + secret + `</div>`},
	{"closed details", `<details><summary>More</summary>` + secret + `</details>`},
	{"visibility inherited", `<div style="visibility:hidden"><p><b>` + secret + `</b></p></div>`},
	{"upper case", `<P STYLE="DISPLAY : NONE">` + secret + `</P>`},
	{"comment inside the declaration", `<p style="display:/**/none">` + secret + `</p>`},
	{"escaped property name", `<p style="displ\61 y:none">` + secret + `</p>`},
	{"escaped in a sheet", `<style>.q{c\6f lor:#ffffff}</style><p class=q>` + secret + `</p>`},
}

// visibleCases each show their text (checked against Chromium too).
var visibleCases = []styleCase{
	{"light on dark button", `<table><tr><td bgcolor="#0b5394" style="padding:12px"><a href="https://x.example" style="color:#ffffff">Pay invoice</a></td></tr></table>`},
	{"grey small print", `<p style="color:#666;font-size:11px">You receive this because you are a customer.</p>`},
	{"dark body", `<body style="background:#111;color:#eee"><p>Dark mode newsletter</p></body>`},
	{"visibility restored", `<div style="visibility:hidden"><p style="visibility:visible">Shown again</p></div>`},
	{"font-size reset", `<div style="font-size:0"><span style="font-size:14px">Column text</span></div>`},
	{"display rule for another class", `<style>.x{display:none}</style><p class=y>Plain paragraph</p>`},
	{"hover rule colour", `<style>a:hover{color:#0000ee}</style><a href="https://x.example">A link</a>`},
	{"relative shift", `<p style="position:relative;left:-10px">Slightly shifted</p>`},
	{"open details", `<details open><summary>More</summary>Details shown</details>`},
}

// A style sheet built to make matching cost a power of the document's
// depth is cut off, and the view says its styles were not all evaluated.
func TestPathologicalSelectorsAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("<style>")
	for i := 0; i < 50; i++ {
		b.WriteString("p " + strings.Repeat("div ", 12) + "span{color:red}\n")
	}
	b.WriteString("</style>" + strings.Repeat("<div>", 400) + "<span>x</span>" + strings.Repeat("</div>", 400))
	start := time.Now()
	v := htmlview.Render(b.String())
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	if !v.Hidden || !strings.Contains(v.HiddenText[len(v.HiddenText)-1].Why, "too complex") {
		t.Errorf("hidden %+v", v.HiddenText)
	}
}
