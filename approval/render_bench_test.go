package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
)

// BenchmarkBuildMessageLargestEmail: the message of the largest email
// prepare accepts (200 KiB of text and HTML together, every word
// distinct, hidden characters throughout), which every channel renders.
func BenchmarkBuildMessageLargestEmail(b *testing.B) {
	act, err := email.New(mailer.NewDevMailbox(1), mail.Address{Address: "sam@corp.example"}, email.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	var text, html strings.Builder
	for i := 0; text.Len() < 100<<10; i++ {
		fmt.Fprintf(&text, "word%d\u200b ", i)
		fmt.Fprintf(&html, `<p>other%d <a href="https://x.example/%d">l</a><img src="https://t.example/%d.gif"></p>`, i, i, i)
	}
	h := html.String()[:99<<10]
	in, _ := json.Marshal(map[string]any{"to": []string{"ann@client.example"}, "subject": "S", "text": text.String(), "html": h})
	p, err := act.Prepare(context.Background(), approval.PrepareRequest{Input: in})
	if err != nil {
		b.Fatal(err)
	}
	op := &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: email.Name, Preview: p.Preview,
		Status: approval.StatusPending, ExpiresAt: time.Now().Add(time.Hour)}
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for b.Loop() {
		approval.BuildMessage(op, &approval.Policy{}, time.Now())
	}
}
