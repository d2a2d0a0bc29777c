package httpreq_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
)

// TestPreparedSizeIsLinear: for the worst bodies we know within a target's
// body limit, what prepare produces (the canonical input, the preview with
// its diff, and the state binding: what is stored and answered) stays
// within 4 × the input + 64 KiB (guarantee 10). The resource read from the
// target is small here; its bound fields' values are the target's data.
func TestPreparedSizeIsLinear(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	f.put("/api/events", event())
	tg := calendarTarget(f)
	tg.MaxBodyBytes = 1 << 20
	a := newAction(t, tg)
	nest := func(n int, inner string) string { return strings.Repeat("[", n) + inner + strings.Repeat("]", n) }
	keys := func(n, width int, value string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%0*d":%s`, width, i, value)
		}
		return b.String()
	}
	prefix := func(depth, keyLen int, inner string) string {
		k := strings.Repeat("p", keyLen)
		return strings.Repeat(`{"`+k+`":`, depth) + inner + strings.Repeat("}", depth)
	}
	for _, c := range []struct{ name, method, path, body string }{
		{"wide and deep array (indent)", "PATCH", "/events/42", `{"title":` + nest(30, strings.Repeat("1,", 30000)+"1") + `}`},
		{"deep objects, wide at the bottom (paths)", "POST", "/events", prefix(30, 1, `{`+keys(6000, 5, "1")+`}`)},
		{"objects, wide at the bottom (indent)", "POST", "/events", prefix(5, 1, `{`+keys(6000, 5, "1")+`}`)},
		{"many tiny fields (diff, binding)", "PATCH", "/events/42", `{` + keys(8000, 5, "1") + `}`},
		{"many fields under a long prefix (paths)", "PATCH", "/events/42", prefix(20, 100, `{`+keys(3000, 5, "1")+`}`)},
		{"long values in the diff", "PATCH", "/events/42", `{` + keys(300, 3, `"`+strings.Repeat("v", 3000)+`"`) + `}`},
		{"big PUT", "PUT", "/events/42", `{` + keys(10000, 5, `[1,2,3]`) + `}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			input := `{"target":"calendar","method":"` + c.method + `","path":"` + c.path + `","body":` + c.body + `}`
			p, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent, Input: json.RawMessage(input)})
			if err != nil {
				if e := codedErr(t, err); e.Code == approval.CodeInvalidInput || e.Code == approval.CodePolicyDenied {
					t.Logf("%d-byte input refused: %s %v", len(input), e.Code, e.Details["rule"])
					return
				}
				t.Fatal(err)
			}
			stored, err := json.Marshal(struct {
				Input   any
				Preview approval.Preview
				State   *approval.StateBinding
			}{p.Input, p.Preview, p.State})
			if err != nil {
				t.Fatal(err)
			}
			bound := 4*len(input) + 64<<10
			t.Logf("input %d bytes → prepared %d bytes (%.2f×; bound %d), diff rows %d, warnings %v",
				len(input), len(stored), float64(len(stored))/float64(len(input)), bound, len(p.Preview.Diff), p.Preview.Warnings)
			if len(stored) > bound {
				t.Fatalf("prepared %d bytes from a %d-byte input: over 4 × input + 64 KiB", len(stored), len(input))
			}
		})
	}
	_ = httpreq.Name
}
