package approval_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/callback"
	"github.com/countersign/countersign/internal/testing/redistest"
)

var hookSecret = []byte("status-webhook-test-secret")

// hooks is an agent's webhook receiver: it verifies each post and keeps
// the events in arrival order; failing makes it answer 503.
type hooks struct {
	mu      sync.Mutex
	events  []callback.Event
	bad     int
	failing atomic.Bool
}

func startHooks(t *testing.T) (*hooks, string) {
	h := &hooks{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if h.failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var ev callback.Event
		err := callback.Verify(hookSecret, r.Header, body, time.Now(), 5*time.Minute)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil || json.Unmarshal(body, &ev) != nil {
			h.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.events = append(h.events, ev)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return h, srv.URL + "/hook"
}

// of is the operation's events in arrival order.
func (h *hooks) of(key string) []callback.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []callback.Event
	for _, e := range h.events {
		if e.OperationKey == key {
			out = append(out, e)
		}
	}
	return out
}

func (h *hooks) wait(t *testing.T, key string, n int) []callback.Event {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if evs := h.of(key); distinct(evs) >= n {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d distinct events, want %d: %+v", key, distinct(h.of(key)), n, h.of(key))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func distinct(evs []callback.Event) int {
	seen := map[string]bool{}
	for _, e := range evs {
		seen[e.ID] = true
	}
	return len(seen)
}

// inOrder checks that the events, redeliveries aside, are the changes
// 1…n in order, never a later one before an earlier one.
func inOrder(t *testing.T, evs []callback.Event, want ...approval.Status) {
	t.Helper()
	next := 1
	for _, e := range evs {
		switch {
		case e.Sequence == next:
			if e.Status != want[next-1] {
				t.Errorf("change %d is %s, want %s", next, e.Status, want[next-1])
			}
			next++
		case e.Sequence < next: // a redelivery: at least once allows it
		default:
			t.Fatalf("change %d arrived before change %d: %+v", e.Sequence, next, evs)
		}
	}
	if next-1 != len(want) {
		t.Fatalf("%d changes, want %d: %+v", next-1, len(want), evs)
	}
}

func webhookFor(url string) approval.Callbacks {
	return callback.New([]callback.Hook{{Principal: "agent", URL: url, Secret: hookSecret}})
}

// A draft that expires unsent is called back too, although its end wakes
// no worker: the sweep wakes it for principals with a webhook.
func TestStatusWebhookHearsAnExpiredDraft(t *testing.T) {
	rcv, url := startHooks(t)
	h := newHarness(t, opts{callbacks: webhookFor(url)})
	h.run(t, 2)
	op := h.prepare(t, 1)
	h.clock.Add(approval.DefaultDraftTTL + time.Minute)
	evs := rcv.wait(t, op.Key, 1)
	inOrder(t, evs, approval.StatusExpired)
	if evs[0].PreviousStatus != approval.StatusDraft {
		t.Fatalf("expired from %q", evs[0].PreviousStatus)
	}
}

// Two replicas, several workers each, many operations decided at once and
// a receiver that fails for a while: every operation's changes arrive, each
// in order, none lost.
func TestStatusWebhookOrderAcrossReplicas(t *testing.T) {
	rcv, url := startHooks(t)
	srv := redistest.Start(t)
	a := newHarnessOn(t, srv.Client(t), opts{callbacks: webhookFor(url)})
	b := newHarnessOn(t, srv.Client(t), opts{callbacks: webhookFor(url), share: a})
	a.run(t, 4)
	b.run(t, 4)
	const n = 12
	var keys []string
	for i := range n {
		op := a.prepare(t, i)
		a.send(t, op.Key)
		keys = append(keys, op.Key)
	}
	rcv.failing.Store(true) // the receiver goes down while the decisions land
	for i, k := range keys {
		svc := a.svc
		if i%2 == 1 {
			svc = b.svc
		}
		op, err := a.svc.Get(context.Background(), a.agent, k)
		if err != nil {
			t.Fatal(err)
		}
		_, res, err := svc.DecideAs(context.Background(), k, "grace", "test", op.PayloadHash, i%3 != 0, "no")
		if err != nil || (res.Outcome != approval.DecideApproved && res.Outcome != approval.DecideRejected) {
			t.Fatalf("decide %d: %s %v", i, res.Outcome, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	rcv.failing.Store(false)
	up := time.Now()
	for i, k := range keys {
		if i%3 == 0 {
			inOrder(t, rcv.wait(t, k, 2), approval.StatusPending, approval.StatusRejected)
		} else {
			inOrder(t, rcv.wait(t, k, 4), approval.StatusPending, approval.StatusApproved, approval.StatusExecuting, approval.StatusSucceeded)
		}
	}
	// The first retry (1 s after the failure) delivers: no change waits
	// behind a lease or a postponed timer.
	if took := time.Since(up); took > 4*time.Second {
		t.Errorf("the changes were all delivered %s after the receiver came back; the first retry is due after 1 s", took)
	}
	if got := a.effect.runs.Load() + b.effect.runs.Load(); got != n-n/3 {
		t.Fatalf("%d executions, want %d", got, n-n/3)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.bad > 0 {
		t.Fatalf("%d posts did not verify", rcv.bad)
	}
}
