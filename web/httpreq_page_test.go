package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/redistest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
)

type pageInbox struct {
	mu    sync.Mutex
	links []string
}

func (b *pageInbox) Notify(_ context.Context, n approval.Notice) (map[string]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n.Link != "" {
		b.links = append(b.links, n.Link)
	}
	return nil, nil
}

// TestHTTPRequestStalePageOffersNoApprove: the approval page of an
// http.request whose resource changed after prepare says so, shows which
// fields changed, and offers no Approve button, on the first opening and on
// every one after.
func TestHTTPRequestStalePageOffersNoApprove(t *testing.T) {
	var mu sync.Mutex
	doc := map[string]any{"title": "Standup", "start": "09:00"}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodGet {
			t.Errorf("a %s reached the target", r.Method)
		}
		_ = json.NewEncoder(w).Encode(doc)
	}))
	defer target.Close()
	a, err := httpreq.New([]httpreq.Target{{Name: "calendar", BaseURL: target.URL, AllowPrivate: true,
		Allow: []httpreq.Rule{{Method: "PATCH", Path: "/events/*"}}, StateFields: []string{"start"}}})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(redistest.Start(t).Client(t), nil)
	defer st.Close()
	agent := &approval.Principal{ID: "agent", Scopes: []string{"http.request"}}
	inbox := &pageInbox{}
	svc, err := approval.NewService(approval.Config{Store: st, Actions: []approval.Action{a}, Links: approval.RandomKeyring(),
		Notifiers: map[string]approval.Notifier{"console": inbox}, PublicURL: "http://countersign.test",
		Policy: &approval.Policy{Principals: []*approval.Principal{agent}, Approvers: []*approval.Approver{{ID: "grace"}},
			Routes: []approval.RouteRule{{ApproverIDs: []string{"grace"}, Notify: []string{"console"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{Service: svc, PublicURL: "http://countersign.test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op, _, err := svc.Prepare(ctx, agent, approval.PrepareCall{Action: "http.request",
		Input: json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/1","body":{"title":"Retro"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(ctx, agent, op.Key); err != nil {
		t.Fatal(err)
	}
	if err := svc.Reconcile(ctx, op.Key); err != nil {
		t.Fatal(err)
	}
	_, token, _ := strings.Cut(inbox.links[0], "/a/")

	get := func() (int, string) {
		resp, err := srv.App().Test(httptest.NewRequest("GET", "/a/"+token, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, html := get(); code != 200 || !strings.Contains(html, `id="approve"`) {
		t.Fatalf("fresh page: %d, approve button %v", code, strings.Contains(html, `id="approve"`))
	}
	mu.Lock()
	doc["start"] = "11:00"
	mu.Unlock()
	for i := range 2 { // the opening that finds the change, and a later one
		code, html := get()
		if code != http.StatusConflict {
			t.Fatalf("opening %d: status %d", i, code)
		}
		if strings.Contains(html, `id="approve"`) || strings.Contains(html, `id="decide"`) {
			t.Fatalf("opening %d offers a decision on a stale operation", i)
		}
		for _, want := range []string{"What this request would change has changed", "Changed since it was prepared",
			"<td>start</td>", "09:00", "11:00", "Nothing was written"} {
			if !strings.Contains(html, want) {
				t.Fatalf("opening %d lacks %q", i, want)
			}
		}
	}
	cur, _ := svc.Get(ctx, agent, op.Key)
	if cur.Status != approval.StatusFailed || cur.Error.Code != approval.CodeStaleState {
		t.Fatalf("status %s %+v", cur.Status, cur.Error)
	}
}
