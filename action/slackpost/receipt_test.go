package slackpost_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/fakeslack"
	"github.com/countersign/countersign/receipt"
)

func countersigned(t *testing.T, o *approval.Operation) (context.Context, *approval.Countersigner, *receipt.Signer) {
	t.Helper()
	k, _ := receipt.GenerateKey()
	s, _ := receipt.NewSigner(k)
	o.Route = approval.Route{Required: 1}
	o.Approvals = []approval.Decision{{Approver: "grace", Via: "email", At: time.Now().Add(-time.Minute)}}
	cs := approval.NewCountersigner(s, "https://cs.example", o, time.Now)
	return approval.WithCountersigner(bg, cs), cs, s
}

// TestPostCarriesTheReceiptInMetadata: the posted message's metadata holds
// the receipt (one, through rate-limit retries), and it verifies for
// audience slack.
func TestPostCarriesTheReceiptInMetadata(t *testing.T) {
	fake := fakeslack.New(t)
	a := slackpost.New(slackpost.Config{Client: fake.Client("xoxb"), Sleep: func(context.Context, time.Duration) {}})
	p, err := prepare(t, a, `{"channel":"#general","text":"Deploy done"}`)
	if err != nil {
		t.Fatal(err)
	}
	o := op(t, slackpost.Name, p)
	ctx, cs, s := countersigned(t, o)
	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 429, RetryAfter: time.Second})
	if _, err := a.Execute(ctx, o); err != nil {
		t.Fatal(err)
	}
	msgs := fake.Messages(fake.ChannelID("#general"))
	if len(msgs) != 1 || msgs[0].Metadata == nil {
		t.Fatalf("messages %+v", msgs)
	}
	tok, _ := msgs[0].Metadata.EventPayload["receipt"].(string)
	if minted := cs.Minted(); len(minted) != 1 || minted[0].Token != tok {
		t.Fatalf("metadata receipt %q, minted %v", tok, minted)
	}
	c, err := receipt.Verify(bg, tok, s.Keys(), receipt.Expect{Audience: "slack"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != o.Key || c.Action != slackpost.Name || c.PayloadHash != o.PayloadHash {
		t.Errorf("claims = %+v", c)
	}
}

// TestDeleteIsReceipted: an undo gets its receipt like any operation; Slack
// keeps nothing of a deleted message, so it is the result's and audit's.
func TestDeleteIsReceipted(t *testing.T) {
	fake := fakeslack.New(t)
	cfg := slackpost.Config{Client: fake.Client("xoxb")}
	post, del := slackpost.New(cfg), slackpost.NewDelete(cfg)
	p, _ := prepare(t, post, `{"channel":"#general","text":"oops"}`)
	o := op(t, slackpost.Name, p)
	res, err := post.Execute(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Status, o.Result = approval.StatusSucceeded, res
	_, input, err := post.UndoInput(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := prepare(t, del, string(input))
	if err != nil {
		t.Fatal(err)
	}
	d := op(t, slackpost.DeleteName, dp)
	d.Key = "op_dddddddddddddddddddddddddd"
	ctx, cs, s := countersigned(t, d)
	if _, err := del.Execute(ctx, d); err != nil {
		t.Fatal(err)
	}
	minted := cs.Minted()
	if len(minted) != 1 {
		t.Fatalf("minted %v", minted)
	}
	if c, err := receipt.Verify(bg, minted[0].Token, s.Keys(), receipt.Expect{Audience: "slack"}); err != nil || c.Action != slackpost.DeleteName || c.ID != d.Key {
		t.Fatalf("%+v %v", c, err)
	}
}
