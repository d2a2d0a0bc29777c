package console_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/safetext"
	"github.com/countersign/countersign/channel/console"
)

// TestWrapGlyphIsExplained: a line of the agent's text too long for the
// terminal continues on a line starting with ┆, and the notice says what
// ┆ means; a notice with no wrapped line has no such legend.
func TestWrapGlyphIsExplained(t *testing.T) {
	const legend = "┆ continues a line of the agent's text that was too long"
	for _, tc := range []struct {
		title string
		want  bool
	}{
		{"Send an email to ann@client.example", false},
		{"Send an email to ann@client.example " + strings.Repeat("about the invoice of March ", 5), true},
	} {
		var b bytes.Buffer
		c := &console.Console{W: &b}
		m := approval.Message{OperationKey: "op_1", Action: "email.send", Title: tc.title, Requester: "support-agent"}
		if _, err := c.Notify(context.Background(), approval.Notice{Message: m, Link: "http://127.0.0.1:8080/a/k1.x.y"}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if got := strings.Contains(out, "  "+safetext.FenceWrap); got != tc.want {
			t.Fatalf("wrapped %v, want %v:\n%s", got, tc.want, out)
		}
		if got := strings.Contains(out, legend); got != tc.want {
			t.Errorf("legend shown %v, want %v:\n%s", got, tc.want, out)
		}
	}
}
