package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
)

// promisesOfADecision are sentences that speak of a decision or a sending
// still to come: a finished page, which has no button, must say none.
var promisesOfADecision = []string{
	"as it will be sent", "when you press a button", "Exactly what will happen", "Nothing happens unless you approve",
	"Approve this action?", "Decide within", "then carries it out", `id="decide"`, `id="bar"`, "What changes<",
}

// TestFinishedPagesPromiseNoDecision (issue 24, point 8): the page of an
// operation that succeeded, failed, was rejected, expired or was canceled
// speaks in the past tense and offers and promises no decision, while it
// still shows, in full, what was requested and what it was to change.
func TestFinishedPagesPromiseNoDecision(t *testing.T) {
	var fail atomic.Bool
	var mu sync.Mutex
	doc := map[string]any{"title": "Standup", "start": "09:00"}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		if r.Method == http.MethodPatch && fail.Load() {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"error":"no"}`)
			return
		}
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(target.Close)
	a, err := httpreq.New([]httpreq.Target{{Name: "calendar", BaseURL: target.URL, AllowPrivate: true,
		Allow: []httpreq.Rule{{Method: "PATCH", Path: "/events/*"}}, StateFields: []string{"start", "title"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	st := store.New(redistest.Start(t).Client(t), nil)
	t.Cleanup(func() { _ = st.Close() })
	var offset atomic.Int64 // the service's clock runs ahead by this much
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	agent := &approval.Principal{ID: "agent", Scopes: []string{"http.request"}}
	inbox := &pageInbox{}
	svc, err := approval.NewService(approval.Config{Store: st, Actions: []approval.Action{a}, Links: approval.RandomKeyring(),
		Notifiers: map[string]approval.Notifier{"console": inbox}, PublicURL: "http://countersign.test", Now: now,
		Policy: &approval.Policy{Principals: []*approval.Principal{agent}, Approvers: []*approval.Approver{{ID: "grace", Name: "Grace"}},
			Routes: []approval.RouteRule{{ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); svc.RunWorkers(ctx, st, "w", 1) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	srv, err := web.New(web.Config{Service: svc, PublicURL: "http://countersign.test"})
	if err != nil {
		t.Fatal(err)
	}
	page := func(token string) string {
		t.Helper()
		resp, err := srv.App().Test(httptest.NewRequest("GET", "/a/"+token, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitFor := func(key string, want approval.Status) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if op, _ := svc.Get(context.Background(), agent, key); op != nil && op.EffectiveStatus(now()) == want {
				return
			}
		}
		t.Fatalf("%s never reached %s", key, want)
	}

	for _, tc := range []struct {
		status approval.Status
		end    func(key, token string)
	}{
		{approval.StatusSucceeded, func(key, token string) {
			if _, res, err := svc.DecideByLink(context.Background(), token, true, ""); err != nil || res.Outcome != approval.DecideApproved {
				t.Fatalf("approve: %+v %v", res, err)
			}
		}},
		{approval.StatusFailed, func(key, token string) {
			fail.Store(true)
			t.Cleanup(func() { fail.Store(false) })
			if _, _, err := svc.DecideByLink(context.Background(), token, true, ""); err != nil {
				t.Fatal(err)
			}
		}},
		{approval.StatusRejected, func(key, token string) {
			if _, _, err := svc.DecideByLink(context.Background(), token, false, "not now"); err != nil {
				t.Fatal(err)
			}
		}},
		{approval.StatusCanceled, func(key, token string) {
			if _, err := svc.Cancel(context.Background(), agent, key); err != nil {
				t.Fatal(err)
			}
		}},
		{approval.StatusExpired, func(key, token string) {
			offset.Store(int64(48 * time.Hour))
			t.Cleanup(func() { offset.Store(0) })
		}},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			inbox.mu.Lock()
			inbox.links = nil
			inbox.mu.Unlock()
			key, token := sendForLink(t, svc, agent, inbox, json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/1","body":{"title":"Retro"}}`))
			if html := page(token); !strings.Contains(html, "as it will be sent") || !strings.Contains(html, `id="decide"`) {
				t.Fatal("the pending page does not read as one (the test no longer looks at the right words)")
			}
			tc.end(key, token)
			waitFor(key, tc.status)
			html := page(token)
			for _, p := range promisesOfADecision {
				if strings.Contains(html, p) {
					t.Errorf("the %s page says %q", tc.status, p)
				}
			}
			for _, want := range []string{"What was requested", "exactly as it was requested", `id="diff"`, "Retro", "Standup"} {
				if !strings.Contains(html, want) {
					t.Errorf("the %s page lacks %q", tc.status, want)
				}
			}
		})
	}
}

// sendForLink prepares and sends an http.request and returns its key and
// the token of the link its notice carried, waiting for the notice: with
// workers running, it may go out from one of them rather than in Reconcile.
func sendForLink(t *testing.T, svc *approval.Service, agent *approval.Principal, inbox *pageInbox, input json.RawMessage) (key, token string) {
	t.Helper()
	ctx := context.Background()
	op, _, err := svc.Prepare(ctx, agent, approval.PrepareCall{Action: "http.request", Input: input})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(ctx, agent, op.Key); err != nil {
		t.Fatal(err)
	}
	if err := svc.Reconcile(ctx, op.Ref()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		inbox.mu.Lock()
		links := slices.Clone(inbox.links)
		inbox.mu.Unlock()
		if len(links) > 0 {
			_, token, _ = strings.Cut(links[0], "/a/")
			return op.Key, token
		}
	}
	t.Fatal("no approval link was sent")
	return "", ""
}
