package console_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

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

// TestRememberedLinks: with Remember, the console keeps the newest link it
// printed per operation and approver (a reminder's replaces the first)
// until it expires; without it, nothing is kept.
func TestRememberedLinks(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	you := &approval.Approver{ID: "you"}
	notice := func(op, link string, expires time.Time) approval.Notice {
		return approval.Notice{Approver: you, Link: link,
			Message: approval.Message{OperationKey: op, Action: "email.send", Title: "t", ExpiresAt: expires}}
	}
	var b bytes.Buffer
	c := &console.Console{W: &b, Remember: true, Now: func() time.Time { return now }}
	for _, n := range []approval.Notice{
		notice("op_1", "http://x/a/first", now.Add(time.Hour)),
		notice("op_1", "http://x/a/reminder", now.Add(time.Hour)),
		notice("op_2", "http://x/a/second", now.Add(time.Minute)),
	} {
		if _, err := c.Notify(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := c.Link("op_1", "you"), "http://x/a/reminder"; got != want {
		t.Errorf("op_1: %q, want %q", got, want)
	}
	if got := c.Link("op_1", "grace"); got != "" {
		t.Errorf("another approver's link: %q", got)
	}
	if got, want := c.Link("op_2", "you"), "http://x/a/second"; got != want {
		t.Errorf("op_2: %q, want %q", got, want)
	}
	now = now.Add(2 * time.Minute)
	if got := c.Link("op_2", "you"); got != "" {
		t.Errorf("an expired link is still shown: %q", got)
	}

	off := &console.Console{W: &b}
	if _, err := off.Notify(context.Background(), notice("op_1", "http://x/a/first", now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if got := off.Link("op_1", "you"); got != "" {
		t.Errorf("a console without Remember kept %q", got)
	}
}
