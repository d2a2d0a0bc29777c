package email_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// Quoted local parts were accepted at prepare and failed only after a
// human approved, and "ada@client.example"@evil.io was shown as
// ada@client.example@evil.io (issue 8). Prepare now accepts only what the
// channel/email/mailer sends unchanged, and refuses the rest naming the address in its
// wire form.
func TestQuotedLocalPartsRefusedAtPrepare(t *testing.T) {
	a := newAction(t, nil, email.Limits{})
	for _, addr := range []string{
		`"ada@client.example"@evil.io`,
		`"john doe"@client.example`,
		`"a\"b"@client.example`,
		`"a..b"@client.example`,
		`Ann <"ann lee"@client.example>`,
	} {
		t.Run(addr, func(t *testing.T) {
			_, err := prepare(t, a, `{"to":[`+strconv.Quote(addr)+`],"subject":"S","text":"t"}`)
			var e *approval.Error
			if !errors.As(err, &e) || e.Code != approval.CodeInvalidInput {
				t.Fatalf("Prepare: %v, want invalid_input", err)
			}
			msg := e.Error()
			if !strings.Contains(msg, "quoted local parts are not accepted") || strings.Contains(msg, "ada@client.example@evil.io") {
				t.Errorf("error %q", msg)
			}
		})
	}
	// A quoted local part that is a plain dot-atom is the same mailbox
	// written plainly: accepted, shown and sent as ada@client.example.
	p, err := prepare(t, a, `{"to":["\"ada\"@client.example"],"subject":"S","text":"t"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Input.(email.Input).To[0].Address; got != "ada@client.example" {
		t.Errorf("stored %q", got)
	}
}

// An address is shown in its wire form, quotes kept: a stored address
// with an @ in its local part can never read as another address.
func TestAddressShownInWireForm(t *testing.T) {
	for _, c := range []struct {
		a    email.Address
		want string
	}{
		{email.Address{Address: "ada@client.example@evil.io"}, `"ada@client.example"@evil.io`},
		{email.Address{Name: "ada@client.example", Address: "x@evil.io"}, `"ada@client.example" <x@evil.io>`},
		{email.Address{Name: "Lee, Ann", Address: "ann@client.example"}, `"Lee, Ann" <ann@client.example>`},
		{email.Address{Name: "Ann  Lee", Address: "ann@client.example"}, `"Ann  Lee" <ann@client.example>`},
		{email.Address{Name: "Ann Lee", Address: "ann@client.example"}, `Ann Lee <ann@client.example>`},
	} {
		if got := c.a.String(); got != c.want {
			t.Errorf("%+v shows as %q, want %q", c.a, got, c.want)
		}
	}
}

// What prepare accepted goes through a real SMTP server exactly as stored.
func TestAcceptedAddressesSurviveSMTP(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	a := newAction(t, smtpSender(t, srv), email.Limits{})
	o, _ := operation(t, a, `{"to":["O'Brien <o'brien+tag@client.example>","\"Lee, Ann\" <ann.lee@Client.Example>"],"subject":"S","text":"t"}`)
	if _, err := a.Execute(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	msgs, err := srv.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(msgs[0].To, ","); got != "o'brien+tag@client.example,ann.lee@client.example" {
		t.Errorf("envelope %q", got)
	}
	pm, _ := msgs[0].Parse()
	to, _ := pm.Addresses("To")
	if len(to) != 2 || to[0].Name != "O'Brien" || to[1].Name != "Lee, Ann" || to[1].Address != "ann.lee@client.example" {
		t.Errorf("To %+v", to)
	}
}
