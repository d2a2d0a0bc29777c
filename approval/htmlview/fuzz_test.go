package htmlview_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/approval/htmlview"
)

// FuzzRender: any document renders without panicking, the hidden text it
// lists is marked in Text, and visible words never include a hidden run
// that appears nowhere else.
func FuzzRender(f *testing.F) {
	for _, c := range hidingCases {
		f.Add(c.html)
	}
	for _, c := range visibleCases {
		f.Add(c.html)
	}
	f.Add(`<style>@media(x){a{b:c}}}}{{{ .a\:b[x="]"]::after{content:"z"} :not(:has(p)) > * ~ + {}</style><p class=a:b>t</p>`)
	f.Add(`<p style="color:rgb(1,2">x</p><p style="font:;transform:matrix(1,2)">y</p><!--[if mso]><b>z<![endif]-->`)
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 64<<10 {
			return
		}
		v := htmlview.Render(src)
		if v.Hidden != (len(v.HiddenText) > 0) {
			t.Fatalf("Hidden %v with %d runs", v.Hidden, len(v.HiddenText))
		}
		for _, h := range v.HiddenText {
			if h.Text != "" && !strings.Contains(v.Text, "[hidden: ") {
				t.Fatalf("hidden run %q not marked in %q", h.Text, v.Text)
			}
		}
	})
}
