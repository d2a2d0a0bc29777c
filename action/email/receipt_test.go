package email_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/receipt"
)

// TestExecuteCarriesTheReceipt: the message that reaches the server carries
// the operation's receipt in Countersign-Receipt, folded onto short lines,
// and it verifies once the folding whitespace is gone.
func TestExecuteCarriesTheReceipt(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	a := newAction(t, smtpSender(t, srv), email.Limits{})
	op, _ := operation(t, a, fullInput)
	op.Route = approval.Route{Required: 1}
	op.Approvals = []approval.Decision{{Approver: "grace", Via: "slack", At: time.Now().Add(-time.Minute)}}
	k, _ := receipt.GenerateKey()
	signer, _ := receipt.NewSigner(k)
	cs := approval.NewCountersigner(signer, "https://cs.example", op, time.Now)
	if _, err := a.Execute(approval.WithCountersigner(context.Background(), cs), op); err != nil {
		t.Fatal(err)
	}
	msgs, err := srv.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(msgs[0].Data), "\r\n") {
		if len(line) > 78 && !strings.HasPrefix(line, "Content-") {
			t.Errorf("header or body line of %d characters: %.60s…", len(line), line)
		}
	}
	parsed, err := msgs[0].Parse()
	if err != nil {
		t.Fatal(err)
	}
	got := parsed.Header.Get(email.ReceiptHeader)
	if minted := cs.Minted(); len(minted) != 1 || strings.Join(strings.Fields(got), "") != minted[0].Token {
		t.Fatalf("header %q, minted %v", got, minted)
	}
	c, err := receipt.Verify(context.Background(), got, signer.Keys(), receipt.Expect{Audience: "email", Issuer: "https://cs.example"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != op.Key || c.Action != email.Name || c.PayloadHash != op.PayloadHash || c.HTTP != nil || c.Approvals[0].Via != "slack" {
		t.Errorf("claims = %+v", c)
	}
}
