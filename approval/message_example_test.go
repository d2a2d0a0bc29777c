package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/mail"
	"time"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
)

// spoofOperation is an email.send prepared by the real action from what a
// hostile agent sent: a display name and a subject turned around by
// U+202E, a zero-width space, and an HTML part that asks for money while
// the text part talks about lunch.
func spoofOperation() *approval.Operation {
	act, err := email.New(mailer.NewDevMailbox(1), mail.Address{Address: "sam@corp.example"}, email.Limits{})
	if err != nil {
		panic(err)
	}
	in, _ := json.Marshal(map[string]any{
		"to":      []string{"\"ada@client.example \u202e<moc.knab@oec>\" <x@evil.io>"},
		"subject": "Q3 numbers \u202eexe.fdp",
		"text":    "Lunch on\u200b Friday?\n",
		"html":    `<p>Please wire <b>$50,000</b> to <a href="https://evil.example/pay">our account</a>.</p>`,
	})
	p, err := act.Prepare(context.Background(), approval.PrepareRequest{Input: in})
	if err != nil {
		panic(err)
	}
	return &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: email.Name, Principal: "support-agent",
		PayloadHash: "sha256:3f9a1c0d2b7e", Preview: p.Preview, Status: approval.StatusPending,
		ExpiresAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Route: approval.Route{Required: 1}}
}

// The channel-neutral message every channel lays out: hidden characters
// escaped and named, the HTML part as its recipient reads it, with where
// its link goes and a warning that it says something else than the text.
func ExampleBuildMessage() {
	m := approval.BuildMessage(spoofOperation(), &approval.Policy{}, time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	fmt.Println(m.Title)
	for _, f := range m.Fields {
		fmt.Printf("%s: %q\n", f.Label, f.Value)
		if f.HTML != nil {
			fmt.Printf("  as read: %q\n", f.HTML.Text)
			for _, l := range f.HTML.Links {
				fmt.Printf("  link [%d] %s -> %s\n", l.N, l.Text, l.Href)
			}
		}
	}
	for _, w := range m.Warnings {
		fmt.Println("!", w)
	}
	// Output:
	// Send an email to x@evil.io
	// To: "\"ada@client.example ⟨U+202E⟩<moc.knab@oec>\" <x@evil.io>"
	// Subject: "Q3 numbers ⟨U+202E⟩exe.fdp"
	// Text: "Lunch on⟨U+200B⟩ Friday?\n"
	// HTML part: "<p>Please wire <b>$50,000</b> to <a href=\"https://evil.example/pay\">our account</a>.</p>\n"
	//   as read: "Please wire $50,000 to our account [1]."
	//   link [1] our account -> https://evil.example/pay
	// From: "sam@corp.example"
	// ! irreversible
	// ! Recipients outside corp.example: x@evil.io.
	// ! A display name looks like an address; the mail goes to the address in angle brackets: "ada@client.example ⟨U+202E⟩<moc.knab@oec>" <x@evil.io>.
	// ! Hidden characters are shown as ⟨U+…⟩: they would be invisible, or change the direction of the text around them, so that it reads differently from what it is. Found: U+202E RIGHT-TO-LEFT OVERRIDE in Summary, To, Subject, a warning; U+200B ZERO WIDTH SPACE in Text.
	// ! The HTML part (what most mail programs show) does not say what the text part says. Only in the HTML part: “please”, “wire”, “50000”, “to”, “our”, “account”. Only in the text part: “lunch”, “on”, “friday”.
}
