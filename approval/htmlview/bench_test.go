package htmlview_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval/htmlview"
)

// styledNewsletter is about 190 KB of HTML with 300 style rules (near the
// 200 KB body limit of email.send).
func styledNewsletter() string {
	var b strings.Builder
	b.WriteString("<html><head><style>")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, ".c%d td p span.x%d, #i%d > a{color:#%06x;background:#fff;font-size:%dpx}\n", i, i, i, i*4099%0xffffff, 10+i%8)
	}
	b.WriteString("</style></head><body><table>")
	for b.Len() < 190<<10 {
		n := b.Len() % 300
		fmt.Fprintf(&b, `<tr><td class="c%d"><p><span class="x%d" style="padding:2px">Row %d of the report with a few words</span> <a id="i%d" href="https://corp.example/%d">link</a></p></td></tr>`, n, n, b.Len(), n, n)
	}
	b.WriteString("</table></body></html>")
	return b.String()
}

func BenchmarkRenderStyled(b *testing.B) {
	src := styledNewsletter()
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		_ = htmlview.Render(src)
	}
}
