package slack_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	notifyslack "github.com/countersign/countersign/channel/slack"
	slackgo "github.com/slack-go/slack"
)

// The approval message of a pending email: a header in the app's words,
// the status, the agent's content fenced in plain text (│ on every line),
// warnings, who asked, and the buttons.
func ExampleRender() {
	text, blocks := notifyslack.Render(approval.Message{
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
	})
	fmt.Println(text)
	for _, b := range blocks {
		fmt.Printf("%s: %s\n", b.BlockType(), firstText(b))
	}
	// Output:
	// Approval needed: Send an email to client@client.example (sha256:3f9a1c0d2b7e)
	// header: Approval needed: email.send
	// section: :hourglass_flowing_sand: *Approval needed* — Waiting for approval (1 required).
	// context: :speech_balloon: *From the agent*, shown exactly: lines start with │, ┆ where a long line continues; ⟨U+…⟩ marks a hidden character
	// section: │ Send an email to client@client.example / │ One email.
	// section: *To*
	// section: │ client@client.example
	// section: *Text* (2 lines, 34 characters)
	// section: │ Hello, / │ your refund is on its way.
	// section: :warning: Warnings / • irreversible
	// context: Requested by *support-agent*
	// actions: approve, reject
}

func firstText(b slackgo.Block) string {
	switch x := b.(type) {
	case *slackgo.HeaderBlock:
		return x.Text.Text
	case *slackgo.SectionBlock:
		return strings.ReplaceAll(x.Text.Text, "\n", " / ")
	case *slackgo.ContextBlock:
		return x.ContextElements.Elements[0].(*slackgo.TextBlockObject).Text
	case *slackgo.ActionBlock:
		var ids []string
		for _, e := range x.Elements.ElementSet {
			ids = append(ids, e.(*slackgo.ButtonBlockElement).ActionID)
		}
		return strings.Join(ids, ", ")
	}
	return ""
}
