package approval_test

import (
	"context"
	"sync"
	"testing"

	"github.com/countersign/countersign/approval"
)

// decidingInbox approves through the link while its notice is on its way,
// and keeps what its messages were updated to.
type decidingInbox struct {
	svc     *approval.Service
	mu      sync.Mutex
	updates []approval.Status
}

func (d *decidingInbox) Notify(ctx context.Context, n approval.Notice) (map[string]string, error) {
	if _, res, err := d.svc.DecideByLink(ctx, tokenOf(n.Link), true, ""); err != nil || res.Outcome != approval.DecideApproved {
		return nil, err
	}
	return map[string]string{"id": "1"}, nil
}

func (d *decidingInbox) Update(_ context.Context, _ approval.Delivery, m approval.Message) error {
	d.mu.Lock()
	d.updates = append(d.updates, m.Status)
	d.mu.Unlock()
	return nil
}

// TestDecisionWhileNoticeOnItsWay: a decision that lands while its
// notice is being delivered finds no delivered message to update; the
// worker that delivered it brings it up to date itself (no other worker
// runs here to do it).
func TestDecisionWhileNoticeOnItsWay(t *testing.T) {
	h := newHarness(t, opts{})
	in := &decidingInbox{}
	svc, err := approval.NewService(approval.Config{
		Store: h.store, Policy: h.svc.Policy(), Actions: []approval.Action{h.effect},
		Notifiers: map[string]approval.Notifier{"console": in}, Links: h.svc.Links(),
		PublicURL: "http://countersign.test", Now: h.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	in.svc = svc
	op, _, err := svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(bg, h.agent, op.Key); err != nil {
		t.Fatal(err)
	}
	if err := svc.Reconcile(bg, op.Ref()); err != nil {
		t.Fatal(err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.updates) != 1 || in.updates[0] != approval.StatusApproved {
		t.Fatalf("the message was updated to %v, want [approved]", in.updates)
	}
}
