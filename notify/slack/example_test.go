package slack_test

import (
	"fmt"
	"time"

	"github.com/countersign/countersign/approval"
	notifyslack "github.com/countersign/countersign/notify/slack"
)

// The approval message of a pending email: header, status, summary, the
// fields, the diff, warnings, who asked, and the buttons.
func ExampleRender() {
	text, blocks := notifyslack.Render(approval.Message{
		OperationKey: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: "email.send",
		Title: "Send an email to client@client.example", Summary: "One email.",
		Fields: []approval.Field{
			{Name: "to", Label: "To", Value: "client@client.example"},
			{Name: "text", Label: "Text", Value: "Hello,\nyour refund is on its way.", Long: true},
		},
		Warnings:  []string{"irreversible"},
		Requester: "support-agent", PayloadHash: "sha256:3f9a1c0d2b7e0000",
		ExpiresAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Required: 1,
		Status: approval.StatusPending, Outcome: "Waiting for approval (1 required).",
	})
	fmt.Println(text)
	for _, b := range blocks {
		fmt.Println(b.BlockType())
	}
	// Output:
	// Approval needed: Send an email to client@client.example (sha256:3f9a1c0d2b7e)
	// header
	// section
	// section
	// section
	// section
	// section
	// section
	// context
	// actions
}
