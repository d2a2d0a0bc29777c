package email_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign/channel/email/mailer"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
)

// The preview is rendered again from the stored input (approval.Previewer):
// it must be exactly the one Prepare showed.
func TestPreviewFromStoredInputIsPreparesPreview(t *testing.T) {
	a := newAction(t, nil, email.Limits{})
	for _, in := range []string{
		`{"to":["ada@client.example"],"subject":"Hi","text":"Hello"}`,
		`{"to":["Ada Lovelace <ada@client.example>","bob@corp.example"],"cc":["\"Ops, EU\" <ops@client.example>"],"bcc":["x@elsewhere.example"],` +
			`"reply_to":"Grace <grace@corp.example>","subject":"  Quarterly  ","text":"Line 1\r\nLine 2","html":"<p>Hi <a href=\"https://x.example\">there</a></p>"}`,
		`{"to":["ada@bücher.example","a@xn--bcher-kva.example"],"subject":"IDN ` + "\u202e" + `","text":"zero\u200bwidth"}`,
		`{"to":["ada@client.example"],"subject":"long","text":"` + longText() + `"}`,
	} {
		prep, err := prepare(t, a, in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		canon, err := approval.Canonical(prep.Input)
		if err != nil {
			t.Fatal(err)
		}
		again, err := a.Preview(canon)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !again.Equal(prep.Preview) {
			t.Fatalf("%s:\nprepare %+v\nstored  %+v", in, prep.Preview, again)
		}
	}
	if _, err := a.Preview([]byte(`{"to":[]}`)); err == nil {
		t.Fatal("an input without sender or recipients rendered")
	}
	if _, err := a.Preview([]byte(`{"from":{"address":"a@b.example"},"to":[{"address":"c@d.example"}],"extra":1}`)); err == nil {
		t.Fatal("an input with an unknown field rendered")
	}
}

func longText() string {
	b := make([]byte, 3000)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}

// BenchmarkStoredPreview is what reading an operation costs for its
// preview: "before", decoding the preview stored beside the input; "now",
// rendering it again from the input (the service keeps the latest ones
// rendered, so most reads pay neither).
func BenchmarkStoredPreview(b *testing.B) {
	a, err := email.New(mailer.NewDevMailbox(1), from, email.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	prep, err := a.Prepare(context.Background(), approval.PrepareRequest{Principal: &approval.Principal{ID: "agent"},
		Input: json.RawMessage(`{"to":["Ada Lovelace <ada@client.example>"],"subject":"Quarterly figures","text":"` + longText()[:900] + `"}`)})
	if err != nil {
		b.Fatal(err)
	}
	in, _ := approval.Canonical(prep.Input)
	stored, _ := json.Marshal(prep.Preview)
	b.Run("before", func(b *testing.B) {
		for b.Loop() {
			var p approval.Preview
			if err := json.Unmarshal(stored, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("now", func(b *testing.B) {
		for b.Loop() {
			if _, err := a.Preview(in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A Reply-To outside the sender's domain takes the recipients' answers
// elsewhere than the From they read: the approver is told where.
func TestPreviewWarnsOfAForeignReplyTo(t *testing.T) {
	a, err := email.New(mailer.NewDevMailbox(1), from, email.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	warned := func(replyTo string) []string {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"to": []string{"ada@client.example"}, "subject": "Invoice", "text": "Hi", "reply_to": replyTo})
		p, err := a.Prepare(context.Background(), approval.PrepareRequest{Principal: &approval.Principal{ID: "agent"}, Input: in})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range p.Preview.Warnings {
			if strings.Contains(w, "Replies") {
				out = append(out, w)
			}
		}
		return out
	}
	if w := warned("Billing <billing@evil.example>"); len(w) != 1 || !strings.Contains(w[0], "billing@evil.example") {
		t.Errorf("a foreign Reply-To: %q", w)
	}
	if w := warned("billing@" + from.Address[strings.IndexByte(from.Address, '@')+1:]); len(w) != 0 {
		t.Errorf("a Reply-To at the sender's domain is flagged: %q", w)
	}
}
