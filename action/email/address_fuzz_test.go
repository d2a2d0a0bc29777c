package email

import (
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// addressSeeds are the seed corpus of FuzzParseAddress: the spoofs of
// issue 8 and the shapes that once slipped through (quoted local parts,
// encoded names, comments, IDN). testdata/fuzz/FuzzParseAddress holds the
// same (written by TestAddressSeedCorpus with UPDATE_SEEDS=1) so that plain
// go test replays them as well as the fuzzer's finds.
var addressSeeds = []string{
	`ada@client.example`,
	`"ada@client.example"@evil.io`,
	`"john doe"@client.example`,
	`"a\"b"@client.example`,
	`Ann Lee <ann@client.example>`,
	`"Lee, Ann" <ann@client.example>`,
	`=?utf-8?q?J=C3=B6rg?= <j@client.example>`,
	`"=?utf-8?q?ab?=" <x@client.example>`,
	"\"ada@client.example\" ,<\u202emoc.knab@oec\" <x@evil.io>",
	"Zero\u200bWidth <z@client.example>",
	`ann@client.example (Ann)`,
	`bob@BÜCHER.example`,
	`x@[127.0.0.1]`,
	`a..b@client.example`,
	`.a@client.example`,
	`"" <ann@client.example>`,
	`"\\" <ann@client.example>`,
	`Ann <ann@client.example>, Bob <bob@client.example>`,
}

// FuzzParseAddress: an address that prepare accepts survives the mailer
// unchanged. go-mail writes it in the header and the envelope exactly as
// stored; a recipient's parser reads back the same name and address; and
// the form shown to approvers (String, the wire form) parses back to it.
func FuzzParseAddress(f *testing.F) {
	from := mail.Address{Name: "Countersign", Address: "agent@corp.example"}
	f.Fuzz(func(t *testing.T, s string) {
		a, why := parseAddress(s)
		if why != "" {
			return
		}
		m := &mailer.Message{From: from, To: []mail.Address{a.mail()}, Subject: "x", Text: "x\n", MessageID: "op_x@countersign"}
		raw, err := mailer.Render(m, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		if err != nil {
			t.Fatalf("prepare accepted %q as %+v, the mailer refuses it: %v", s, a, err)
		}
		p, err := smtptest.Parse(raw)
		if err != nil {
			t.Fatalf("%q: the message does not parse: %v", s, err)
		}
		to, err := p.Addresses("To")
		if err != nil || len(to) != 1 || to[0].Name != a.Name || to[0].Address != a.Address {
			t.Fatalf("%q: stored %+v, the recipient reads To %+v (%v)", s, a, to, err)
		}
		// go-mail's RCPT TO is net/mail's String of the bare address.
		if env, want := (&mail.Address{Address: a.Address}).String(), "<"+a.Address+">"; env != want {
			t.Fatalf("%q: envelope %s, stored %s", s, env, want)
		}
		shown, why := parseAddress(a.String())
		if why != "" || shown != a {
			t.Fatalf("%q: shown as %q, which reads back as %+v (%s), stored %+v", s, a.String(), shown, why, a)
		}
	})
}

// TestAddressSeedCorpus keeps testdata/fuzz/FuzzParseAddress in step with
// addressSeeds (UPDATE_SEEDS=1 go test -run AddressSeedCorpus rewrites it).
func TestAddressSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParseAddress")
	for i, s := range addressSeeds {
		path := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
		want := "go test fuzz v1\nstring(" + strconv.Quote(s) + ")\n"
		if os.Getenv("UPDATE_SEEDS") != "" {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is not the seed %q; run UPDATE_SEEDS=1 go test -run AddressSeedCorpus ./action/email", path, s)
		}
	}
}
