package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
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
	svc, srv, agent, inbox := calendarPage(t, target.URL, []string{"start"}, false)
	key, token := sentLink(t, svc, agent, inbox, json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/1","body":{"title":"Retro"}}`))

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
	cur, _ := svc.Get(context.Background(), agent, key)
	if cur.Status != approval.StatusFailed || cur.Error.Code != approval.CodeStaleState {
		t.Fatalf("status %s %+v", cur.Status, cur.Error)
	}
}

// TestBulkPageShowsEveryItemAndItsStaleItem: the approval page of a bulk
// shows the summary and every item with its diff, and offers Approve; once
// one item's resource changes, the page names that item among what
// changed and offers no decision.
func TestBulkPageShowsEveryItemAndItsStaleItem(t *testing.T) {
	var mu sync.Mutex
	docs := map[string]map[string]any{}
	for i := 1; i <= 20; i++ {
		docs[fmt.Sprintf("/events/%d", i)] = map[string]any{"title": fmt.Sprintf("Event %d", i), "start": "09:00", "end": "09:30"}
	}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodGet {
			t.Errorf("a %s reached the target", r.Method)
		}
		_ = json.NewEncoder(w).Encode(docs[r.URL.Path])
	}))
	defer target.Close()
	a, err := httpreq.New([]httpreq.Target{{Name: "calendar", BaseURL: target.URL, AllowPrivate: true,
		Allow: []httpreq.Rule{{Method: "PATCH", Path: "/events/*"}, {Method: "DELETE", Path: "/events/*"}}, StateFields: []string{"title"}}})
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
	var items []string
	for i := 1; i <= 20; i++ {
		items = append(items, fmt.Sprintf(`{"method":"PATCH","path":"/events/%d","body":{"start":"10:%02d","end":"10:30"}}`, i, i))
	}
	items[19] = `{"method":"DELETE","path":"/events/20"}`
	_, token := sentLink(t, svc, agent, inbox, json.RawMessage(`{"target":"calendar","items":[`+strings.Join(items, ",")+`]}`))
	get := func() (int, string) {
		resp, err := srv.App().Test(httptest.NewRequest("GET", "/a/"+token, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, html := get()
	if code != 200 || !strings.Contains(html, `id="approve"`) {
		t.Fatalf("fresh page: %d, approve button %v", code, strings.Contains(html, `id="approve"`))
	}
	for _, want := range []string{"20 events on calendar: 19 moved, 1 deleted", "The 20 requests, in the order they are written",
		`id="item-1"`, `<span class="agent">PATCH /events/1 (moved)</span>`, "&#34;10:07&#34;",
		`id="item-20"`, `<span class="agent">DELETE /events/20 (deleted)</span>`, "&#34;Event 20&#34;"} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(html, `<div class="item"`); n != 20 {
		t.Errorf("page shows %d items, want 20", n)
	}

	mu.Lock()
	docs["/events/12"]["title"] = "Renamed meanwhile"
	mu.Unlock()
	code, html = get()
	if code != http.StatusConflict || strings.Contains(html, `id="approve"`) {
		t.Fatalf("stale page: %d, approve %v", code, strings.Contains(html, `id="approve"`))
	}
	for _, want := range []string{"Changed since it was prepared", "<th>Item</th>", "<td>12</td><td>title</td>", "Renamed meanwhile"} {
		if !strings.Contains(html, want) {
			t.Errorf("stale page lacks %q", want)
		}
	}
}

// TestEditFormLabelsAreEscaped: the edit form of an http.request names
// each field by its JSON key, which the agent chose. A key holding a
// right-to-left override, a zero-width space or a line break is shown
// with visible escapes there too, as everywhere else on the page, so the
// form cannot label a field as something it is not.
func TestEditFormLabelsAreEscaped(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"title": "Standup"})
	}))
	defer target.Close()
	svc, srv, agent, inbox := calendarPage(t, target.URL, nil, true)
	_, token := sentLink(t, svc, agent, inbox, json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/1",`+
		`"body":{"amount\u202e":"1","note\u200b":"x","a\nApproved by Grace Park":"y"}}`))
	resp, err := srv.App().Test(httptest.NewRequest("GET", "/a/"+token, nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	if !strings.Contains(page, `id="edit"`) {
		t.Fatal("the page offers no edit form")
	}
	_, form, _ := strings.Cut(page, `id="edit"`)
	form, _, _ = strings.Cut(form, "</form>")
	form = html.UnescapeString(form)
	for _, want := range []string{"amount⟨U+202E⟩", "note⟨U+200B⟩", "a⟨U+000A⟩Approved by Grace Park"} {
		if !strings.Contains(form, want) {
			t.Errorf("the edit form does not label a field %q:\n%s", want, form)
		}
	}
	// What a person reads (the text between tags, not attributes or the
	// values being edited) holds no hidden character.
	for _, label := range strings.Split(form, "<label")[1:] {
		_, text, _ := strings.Cut(label, ">")
		text, _, _ = strings.Cut(text, "</label>")
		for _, r := range text {
			if r == '\u202e' || r == '\u200b' || r == '\n' {
				t.Errorf("an edit label shows %U as is: %q", r, text)
			}
		}
	}
}

// calendarPage is a service with one http.request target, calendar at
// base (PATCH /events/* allowed, bound to stateFields), one approver
// notified on the console, and its web server.
func calendarPage(t *testing.T, base string, stateFields []string, allowEdit bool) (*approval.Service, *web.Server, *approval.Principal, *pageInbox) {
	t.Helper()
	a, err := httpreq.New([]httpreq.Target{{Name: "calendar", BaseURL: base, AllowPrivate: true,
		Allow: []httpreq.Rule{{Method: "PATCH", Path: "/events/*"}}, StateFields: stateFields}})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(redistest.Start(t).Client(t), nil)
	t.Cleanup(func() { _ = st.Close() })
	agent := &approval.Principal{ID: "agent", Scopes: []string{"http.request"}}
	inbox := &pageInbox{}
	svc, err := approval.NewService(approval.Config{Store: st, Actions: []approval.Action{a}, Links: approval.RandomKeyring(),
		Notifiers: map[string]approval.Notifier{"console": inbox}, PublicURL: "http://countersign.test",
		Policy: &approval.Policy{Principals: []*approval.Principal{agent}, Approvers: []*approval.Approver{{ID: "grace"}},
			Routes: []approval.RouteRule{{ApproverIDs: []string{"grace"}, Notify: []string{"console"}, AllowEdit: allowEdit}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{Service: svc, PublicURL: "http://countersign.test"})
	if err != nil {
		t.Fatal(err)
	}
	return svc, srv, agent, inbox
}

// sentLink prepares and sends an http.request of input, lets its notice
// go out, and returns its key and the token of the approval link it carried.
func sentLink(t *testing.T, svc *approval.Service, agent *approval.Principal, inbox *pageInbox, input json.RawMessage) (key, token string) {
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
	_, token, _ = strings.Cut(inbox.links[0], "/a/")
	return op.Key, token
}
