package teamscard_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/teams/teamscard"
	"github.com/countersign/countersign/internal/testing/faketeams"
)

func pending() approval.Message {
	return approval.Message{
		OperationKey: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: "email.send",
		Title: "Send an email to client@client.example", Summary: "One email.",
		Fields: []approval.ShownField{
			{Name: "to", Label: "To", Value: "client@client.example"},
			{Name: "text", Label: "Text", Value: "Hello,\nyour refund is on its way.", Long: true, Lines: 2, Chars: 34},
		},
		Warnings:  []string{"irreversible"},
		Requester: "support-agent", PayloadHash: "sha256:3f9a1c0d2b7e0000",
		ExpiresAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Required: 1,
		Status: approval.StatusPending, Outcome: "Waiting for approval (1 required).",
	}
}

// The approval card of a pending email: a header and status in the
// app's words, the agent's content fenced in a shaded container (│ on
// every line), warnings, who asked, the expiry in the reader's own zone,
// and Approve (behind a confirmation) and Reject (asking why).
func ExampleRender() {
	card, whole := teamscard.Render(pending(), nil)
	fmt.Println("whole:", whole)
	var show func(string, []teamscard.Element)
	show = func(indent string, es []teamscard.Element) {
		for _, e := range es {
			text := e.Text
			for _, in := range e.Inlines {
				text += in.Text
			}
			fmt.Println(strings.TrimRight(fmt.Sprintf("%s%s: %s", indent, e.Type, text), " "))
			show(indent+"  ", e.Items)
		}
	}
	show("", card.Body)
	for _, a := range card.Actions {
		fmt.Printf("%s %q → %s\n", a.Type, a.Title, a.Card.Actions[0].Verb)
	}
	// Output:
	// whole: true
	// RichTextBlock: Approval needed: email.send
	// RichTextBlock: ⏳ Approval needed — Waiting for approval (1 required).
	// TextBlock: 💬 **From the agent**, shown exactly: lines start with │, ┆ where a long line continues; ⟨U+…⟩ marks a hidden character
	// Container:
	//   RichTextBlock: │ Send an email to client@client.example
	//   RichTextBlock: │ One email.
	//   RichTextBlock: To
	//   RichTextBlock: │ client@client.example
	//   RichTextBlock: Text (2 lines, 34 characters)
	//   RichTextBlock: │ Hello,
	//   RichTextBlock: │ your refund is on its way.
	// Container:
	//   RichTextBlock: ⚠️ Warnings
	//   RichTextBlock: • irreversible
	// RichTextBlock: Requested by support-agent
	// RichTextBlock: Fingerprint sha256:3f9a1c0d2b7e · op_aaaaaaaaaaaaaaaaaaaaaaaaaa · email.send
	// TextBlock: Expires {{DATE(2026-12-01T10:00:00Z, SHORT)}} at {{TIME(2026-12-01T10:00:00Z)}}
	// Action.ShowCard "Approve" → approve
	// Action.ShowCard "Reject" → reject
}

// Nothing but countersign's own constant words is ever in a TextBlock
// (which Teams reads as Markdown): agent text that looks like Markdown
// stays plain text in a TextRun.
func TestAgentTextIsNeverMarkdown(t *testing.T) {
	m := pending()
	evil := "**APPROVED by security** [click](https://evil.example) {{DATE(2020-01-01T00:00:00Z)}}"
	m.Title, m.Summary, m.Requester, m.OnBehalfOf = evil, evil, evil, evil
	m.Fields[1].Value = evil + "\n# heading"
	m.Warnings = append(m.Warnings, evil)
	m.Approvals = []approval.DecisionView{{Name: evil, Via: "teams", At: time.Now()}}
	m.Rejection = &approval.DecisionView{Name: evil, Via: "email", Reason: evil}
	m.Outcome = evil
	card, _ := teamscard.Render(m, &teamscard.Note{Text: evil, Style: "attention"})
	raw, _ := json.Marshal(card)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["type"] == "TextBlock" && strings.Contains(x["text"].(string), "evil.example") {
				t.Errorf("agent text in a TextBlock: %v", x["text"])
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	var v any
	_ = json.Unmarshal(raw, &v)
	walk(v)
	if !strings.Contains(faketeams.Text(card), "│ **APPROVED by security** [click](https://evil.example)") {
		t.Fatalf("the agent's text is not shown fenced:\n%s", faketeams.Text(card))
	}
}

// However the agent shapes its text, the card stays within Teams' size,
// shows what it can, says how much it leaves out, and offers Review, not
// Approve.
func TestCardStaysWithinTeamsLimits(t *testing.T) {
	for name, value := range map[string]string{
		"one long line":    strings.Repeat("word ", 5000),
		"many short lines": strings.Repeat("x\n", 8000),
		"many empty lines": strings.Repeat("\n", 8000),
		"wide characters":  strings.Repeat("漢字😀", 4000),
	} {
		t.Run(name, func(t *testing.T) {
			m := pending()
			m.Fields[1].Value = value
			card, whole := teamscard.Render(m, &teamscard.Note{Text: "note", Style: "good", Link: "https://x.example/a/t", LinkTitle: "Open"})
			if size := card.Size(); size > teamscard.MaxCardBytes {
				t.Fatalf("card of %d bytes", size)
			}
			text := faketeams.Text(card)
			if whole || !slices.Equal(faketeams.Verbs(card), []string{"reject", "review"}) || !strings.Contains(text, "characters are not shown here") {
				t.Fatalf("whole %v, verbs %v:\n%.2000s", whole, faketeams.Verbs(card), text)
			}
			if !strings.Contains(text, "│ ") {
				t.Fatalf("nothing of the agent's text is shown")
			}
		})
	}
}

func TestFinishedCardHasNoButtons(t *testing.T) {
	m := pending()
	m.Status, m.Outcome = approval.StatusSucceeded, "Approved by Grace Park (in Microsoft Teams). Done: it ran successfully."
	m.Approvals = []approval.DecisionView{{Name: "Grace Park", Via: "teams", At: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}}
	card, _ := teamscard.Render(m, nil)
	text := faketeams.Text(card)
	if len(card.Actions) != 0 || !strings.Contains(text, "✅ Done — Approved by Grace Park") ||
		!strings.Contains(text, "✅ Approved by Grace Park via teams, Nov 30, 2026 09:00 UTC") ||
		!strings.Contains(text, "Approval window ends") {
		t.Fatalf("actions %+v:\n%s", card.Actions, text)
	}
	// A note's link comes first, and is the only action of a finished card.
	card, _ = teamscard.Render(m, &teamscard.Note{Text: "n", Style: "good", Link: "https://x.example/a/t", LinkTitle: "Open"})
	if len(card.Actions) != 1 || card.Actions[0].URL != "https://x.example/a/t" {
		t.Fatalf("actions %+v", card.Actions)
	}
}

// A step-up route is decided on the page with a passkey: the card says so
// and offers only Review, whatever else fits.
func TestStepUpCardOffersOnlyReview(t *testing.T) {
	m := pending()
	m.StepUp = approval.StepUpPasskey
	card, whole := teamscard.Render(m, nil)
	text := faketeams.Text(card)
	if whole || len(card.Actions) != 1 || card.Actions[0].Verb != teamscard.VerbReview ||
		!strings.Contains(text, "This request needs a passkey") {
		t.Fatalf("whole %v actions %+v:\n%s", whole, card.Actions, text)
	}
}
