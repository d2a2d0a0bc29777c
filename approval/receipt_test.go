package approval_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

func receiptSigner(t *testing.T) *receipt.Signer {
	t.Helper()
	k, err := receipt.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := receipt.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func eventOf(t *testing.T, h *harness, key, name string) approval.Event {
	t.Helper()
	evs, err := h.svc.Events(bg, h.agent, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Event == name {
			return e
		}
	}
	t.Fatalf("no %s event in %v", name, evs)
	return approval.Event{}
}

// TestReceiptMintedPastTheClaim: the action finds a countersigner only in
// Execute, after the claim was won; the receipt it mints says who approved
// what, lands in result.receipt, and its id in the audit.
func TestReceiptMintedPastTheClaim(t *testing.T) {
	signer := receiptSigner(t)
	h := newHarness(t, opts{required: 2, approvers: []string{"grace", "ada"}, receipts: signer})
	h.run(t, 2)
	op := h.prepare(t, 3)
	h.send(t, op.Key)
	for _, who := range []string{"grace", "ada"} {
		if _, _, err := h.svc.DecideByLink(bg, h.inbox.link(t, who), true, ""); err != nil {
			t.Fatal(err)
		}
	}
	done := h.waitStatus(t, op.Key, approval.StatusSucceeded)
	if n := h.effect.prepareSigned.Load(); n != 0 {
		t.Fatalf("%d prepares found a countersigner", n)
	}
	h.effect.mu.Lock()
	minted := append([]string(nil), h.effect.receipts...)
	h.effect.mu.Unlock()
	if len(minted) != 1 {
		t.Fatalf("%d receipts minted", len(minted))
	}
	var result struct {
		OK      bool   `json:"ok"`
		Receipt string `json:"receipt"`
	}
	if err := json.Unmarshal(done.Result, &result); err != nil || !result.OK || result.Receipt != minted[0] {
		t.Fatalf("result = %s (%v)", done.Result, err)
	}
	c, err := receipt.Verify(context.Background(), result.Receipt, signer.Keys(),
		receipt.Expect{Audience: "test", Issuer: "http://countersign.test", Now: h.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != op.Key || c.Action != "test.effect" || c.PayloadHash != op.PayloadHash || c.Required != 2 || len(c.Approvals) != 2 {
		t.Fatalf("claims = %+v", c)
	}
	for i, a := range c.Approvals {
		d := done.Approvals[i]
		if a.Subject != d.Approver || a.Via != d.Via || !a.At.Equal(d.At) {
			t.Errorf("apr[%d] = %+v, approval %+v", i, a, d)
		}
	}
	if exp := time.Unix(c.Expires, 0).Sub(time.Unix(c.IssuedAt, 0)); exp != approval.ReceiptTTL {
		t.Errorf("lifetime %s", exp)
	}
	if ev := eventOf(t, h, op.Key, "succeeded"); ev.Details["receipt"] != op.Key {
		t.Errorf("succeeded event details = %v", ev.Details)
	}
}

// TestReceiptOfAFailedExecution: the effect may have gone out with its
// receipt, so the failed event names it; the result stays empty.
func TestReceiptOfAFailedExecution(t *testing.T) {
	h := newHarness(t, opts{receipts: receiptSigner(t)})
	h.effect.fail.Store(&approval.ExecError{Code: approval.CodeExecutionFailed, Message: "target answered 500"})
	h.run(t, 1)
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	if _, _, err := h.svc.DecideByLink(bg, h.inbox.link(t, "grace"), true, ""); err != nil {
		t.Fatal(err)
	}
	failed := h.waitStatus(t, op.Key, approval.StatusFailed)
	if failed.Result != nil {
		t.Errorf("result = %s", failed.Result)
	}
	if ev := eventOf(t, h, op.Key, "failed"); ev.Details["receipt"] != op.Key {
		t.Errorf("failed event details = %v", ev.Details)
	}
}
