package email_test

import (
	"context"
	"encoding/json"
	"mime"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// A subject, display name or address holding an RFC 2047 encoded word was
// shown literally to the approver and decoded by the recipient's program
// into other words (issue 19, guarantee 13): every header value the agent
// writes is refused with invalid_input when it holds that syntax, in any
// case and any charset, wherever in the value it is.
func TestEncodedWordsRefusedInEveryHeader(t *testing.T) {
	a := newAction(t, nil, email.Limits{})
	words := []string{
		"=?utf-8?q?Please_wire_50000?=",
		"=?UTF-8?B?UGxlYXNlIHdpcmU=?=",
		"=?iso-8859-1*en?Q?wire?=",
		"Invoice=?x?q?wire?=now",
		"=?utf-8?Q?=3D=3Futf-8=3Fq=3Fwire=3F=3D?=",
	}
	for _, w := range words {
		for _, c := range []struct{ field, input string }{
			{"subject", `{"to":["ada@client.example"],"subject":` + q(w) + `,"text":"t"}`},
			{"to[0]", `{"to":[` + q(`"`+w+`" <ada@client.example>`) + `],"subject":"S","text":"t"}`},
			{"to[0]", `{"to":[` + q(w+` <ada@client.example>`) + `],"subject":"S","text":"t"}`},
			{"cc[0]", `{"to":["b@client.example"],"cc":[` + q(`Ada `+w+` <ada@client.example>`) + `],"subject":"S","text":"t"}`},
			{"bcc[0]", `{"to":["b@client.example"],"bcc":[` + q(`"`+w+`" <ada@client.example>`) + `],"subject":"S","text":"t"}`},
			{"reply_to", `{"to":["b@client.example"],"reply_to":` + q(`"`+w+`" <ada@client.example>`) + `,"subject":"S","text":"t"}`},
			{"attachments[0].name", withAttachments(att(w+".pdf", "application/pdf", pdf))},
		} {
			_, err := prepare(t, a, c.input)
			if err == nil {
				t.Errorf("%s %q: accepted", c.field, w)
				continue
			}
			if got := fieldsOf(t, err); len(got) != 1 || got[0] != c.field {
				t.Errorf("%s %q: fields %v", c.field, w, got)
			}
		}
	}
	// An encoded word in a local part (a valid dot-atom) is refused too.
	if _, err := prepare(t, a, `{"to":["=?utf-8?q?x?=@client.example"],"subject":"S","text":"t"}`); err == nil {
		t.Error("encoded word in a local part accepted")
	}
	// Quoted pairs hide the syntax from the text as written; the parsed
	// display name still holds it (hostile round 3).
	for _, addr := range []string{`"=\?utf-8\?q\?Please_wire\?\=" <ada@client.example>`, `"=\?utf-8?q?wire?=" <ada@client.example>`} {
		if _, err := prepare(t, a, `{"to":[`+q(addr)+`],"subject":"S","text":"t"}`); err == nil {
			t.Errorf("%s: accepted", addr)
		} else if got := fieldsOf(t, err); len(got) != 1 || got[0] != "to[0]" {
			t.Errorf("%s: fields %v", addr, got)
		}
	}
	// Text that only looks a little like it stays accepted.
	for _, s := range []string{"Is 2+2=? Four", "Q&A: what? =)", "a ?= b =? c"} {
		if _, err := prepare(t, a, `{"to":["ada@client.example"],"subject":`+q(s)+`,"text":"t"}`); err != nil {
			t.Errorf("subject %q refused: %v", s, err)
		}
	}
}

// Attachment names that a recipient's program reads as another name: RFC
// 2231 parameter syntax, and a trailing dot that Windows drops (so that
// "invoice.exe." is saved and run as invoice.exe, and no warning named
// it a program).
func TestAttachmentNamesThatChangeOnArrival(t *testing.T) {
	a := newAction(t, nil, email.Limits{})
	for _, name := range []string{
		"invoice.pdf; filename*=UTF-8''invoice.exe",
		"report*=utf-8''x.pdf",
		"setup.exe.",
		"invoice.pdf . .",
	} {
		_, err := prepare(t, a, withAttachments(att(name, "application/pdf", pdf)))
		if err == nil {
			t.Errorf("name %q accepted", name)
			continue
		}
		if got := fieldsOf(t, err); len(got) != 1 || got[0] != "attachments[0].name" {
			t.Errorf("name %q: fields %v", name, got)
		}
	}
}

// What the recipient's program shows equals what the approver was shown:
// every accepted subject and display name, sent through a real SMTP
// server and decoded as a mail program decodes headers, reads as the
// preview says, for hostile inputs that are accepted.
func TestHeadersArriveAsShown(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	a := newAction(t, smtpSender(t, srv), email.Limits{})
	subjects := []string{
		"Grüße aus Köln — Rechnung 2026",
		strings.Repeat("long words that fold ", 30),
		"Is 2+2=? Four",
		"Ümlaut ?= and =",
		"x\u00a0y   z",
	}
	names := []string{`Zoë Ünal`, `Ann "The Boss" Lee`, `Lee, Ann`, `ceo@corp.example`, `Ann (CFO)`}
	for i, subject := range subjects {
		to := names[i%len(names)]
		raw, _ := json.Marshal(map[string]any{"to": []string{(&mailAddr{to, "ada@client.example"}).String()}, "subject": subject, "text": "t"})
		op, p := operation(t, a, string(raw))
		in := p.Input.(email.Input)
		if _, err := a.Execute(context.Background(), op); err != nil {
			t.Fatal(err)
		}
		msgs, err := srv.WaitFor(i+1, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got, err := msgs[i].Parse()
		if err != nil {
			t.Fatal(err)
		}
		// Decode again, as a lenient program would: nothing more decodes.
		again, _ := new(mime.WordDecoder).DecodeHeader(got.Subject)
		if got.Subject != in.Subject || again != in.Subject {
			t.Errorf("subject arrived as %q (decoded again %q), shown as %q", got.Subject, again, in.Subject)
		}
		addrs, err := got.Addresses("To")
		if err != nil || len(addrs) != 1 {
			t.Fatalf("To: %v %v", addrs, err)
		}
		if addrs[0].Name != in.To[0].Name || addrs[0].Address != in.To[0].Address {
			t.Errorf("To arrived as %q <%s>, shown as %q <%s>", addrs[0].Name, addrs[0].Address, in.To[0].Name, in.To[0].Address)
		}
	}
}

type mailAddr struct{ name, addr string }

func (m *mailAddr) String() string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(m.name) + `" <` + m.addr + ">"
}

func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A display name that reads as an address with a full-width @ was not
// flagged, nor an internationalized Reply-To domain (issue 19 class 3).
func TestLookAlikeNamesAndReplyToDomainWarned(t *testing.T) {
	a := newAction(t, nil, email.Limits{})
	p, err := prepare(t, a, `{"to":["ceo＠corp.example <x@client.example>"],"reply_to":"billing@bücher.example","subject":"S","text":"t"}`)
	if err != nil {
		t.Fatal(err)
	}
	var named, idn bool
	for i, w := range p.Preview.Warnings {
		switch p.Preview.Code(i) {
		case "display_name_address":
			named = strings.Contains(w, "ceo＠corp.example")
		case "idn_domain":
			idn = strings.Contains(w, "billing@xn--bcher-kva.example")
		}
	}
	if !named || !idn {
		t.Errorf("warnings %q codes %q", p.Preview.Warnings, p.Preview.WarningCodes)
	}
}
