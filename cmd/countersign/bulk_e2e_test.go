package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/browsertest"
	"github.com/countersign/countersign/mcpserver"
	"github.com/countersign/countersign/receipt"
)

// bulkTarget is a calendar API with one ETag per event, If-Match answered
// with 412, and receipt.Middleware in front (keys from countersign's
// JWKS): every write it applies had a valid receipt covering its method,
// URL, body and If-Match. It counts writes by Idempotency-Key.
type bulkTarget struct {
	srv  *httptest.Server
	mw   atomic.Pointer[http.Handler]
	mu   sync.Mutex
	docs map[string]map[string]any
	ver  map[string]int
	// byKey counts the writes that arrived per Idempotency-Key; applied
	// lists the receipt ids of the writes applied, in order.
	byKey   map[string]int
	applied []string
	// failPath, when set, answers the write to it with 500.
	failPath string
}

func newBulkTarget(t *testing.T, n int) *bulkTarget {
	bt := &bulkTarget{docs: map[string]map[string]any{}, ver: map[string]int{}, byKey: map[string]int{}}
	for i := 1; i <= n; i++ {
		bt.docs[fmt.Sprintf("/api/events/%d", i)] = map[string]any{"title": fmt.Sprintf("Weekly %d", i),
			"start": "2026-06-01T09:00:00Z", "end": "2026-06-01T09:30:00Z"}
	}
	bt.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			bt.mu.Lock()
			bt.byKey[r.Header.Get("Idempotency-Key")]++
			bt.mu.Unlock()
		}
		(*bt.mw.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(bt.srv.Close)
	return bt
}

func (bt *bulkTarget) guard(t *testing.T, publicURL string) {
	mw, err := receipt.Middleware(receipt.Config{Audience: "calendar", Issuer: publicURL,
		Keys: receipt.NewRemoteKeys(publicURL+"/.well-known/jwks.json", receipt.RemoteOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(bt.api))
	bt.mw.Store(&h)
}

func (bt *bulkTarget) api(w http.ResponseWriter, r *http.Request) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	doc, ok := bt.docs[r.URL.Path]
	if !ok {
		w.WriteHeader(404)
		return
	}
	etag := fmt.Sprintf(`"%d"`, bt.ver[r.URL.Path])
	if r.Method != http.MethodGet {
		if im := r.Header.Get("If-Match"); im != "" && im != etag {
			w.WriteHeader(412)
			return
		}
		if r.URL.Path == bt.failPath {
			w.WriteHeader(500)
			return
		}
		id := "(no receipt)"
		if c := receipt.FromContext(r.Context()); c != nil {
			id = c.ID
		}
		bt.applied = append(bt.applied, id)
	}
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("ETag", etag)
		_ = json.NewEncoder(w).Encode(doc)
	case http.MethodPatch:
		var patch map[string]any
		_ = json.NewDecoder(r.Body).Decode(&patch)
		for k, v := range patch {
			doc[k] = v
		}
		bt.ver[r.URL.Path]++
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true})
	case http.MethodDelete:
		delete(bt.docs, r.URL.Path)
		w.WriteHeader(204)
	default:
		w.WriteHeader(405)
	}
}

func (bt *bulkTarget) start(i int) any {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if d, ok := bt.docs[fmt.Sprintf("/api/events/%d", i)]; ok {
		return d["start"]
	}
	return nil
}

// bulkBody moves events 1..n to hour hh, and deletes those in deletes.
func bulkBody(n, hh int, deletes ...int) string {
	var items []string
	for i := 1; i <= n; i++ {
		item := fmt.Sprintf(`{"method":"PATCH","path":"/events/%d","body":{"start":"2026-06-01T%02d:00:00Z","end":"2026-06-01T%02d:30:00Z"}}`, i, hh, hh)
		for _, d := range deletes {
			if d == i {
				item = fmt.Sprintf(`{"method":"DELETE","path":"/events/%d"}`, i)
			}
		}
		items = append(items, item)
	}
	return `{"action":"http.request","input":{"target":"calendar","items":[` + strings.Join(items, ",") + `]}}`
}

type bulkView struct {
	Key     string `json:"operation_key"`
	Preview struct {
		Title string `json:"title"`
		Diff  []struct {
			Item int `json:"item"`
		} `json:"diff"`
	} `json:"preview"`
	Result struct {
		Items []struct {
			Item      int    `json:"item"`
			Outcome   string `json:"outcome"`
			ReceiptID string `json:"receipt_id"`
		} `json:"items"`
		Written      int `json:"written"`
		NotAttempted int `json:"not_attempted"`
	} `json:"result"`
	Error *struct {
		Code    string         `json:"code"`
		Details map[string]any `json:"details"`
	} `json:"error"`
	NextStep string `json:"next_step"`
}

// TestBulkRescheduleEndToEnd: an agent prepares a reschedule of 20 events
// (18 moved, 2 deleted) as one operation over REST; a human approves it
// with one click on the page from the console link; the worker writes the
// 20 items in order, each with its own If-Match, Idempotency-Key op_…:N
// and receipt, which the target's middleware verifies. Then a bulk fails
// at item 3: partial, the rest not attempted, and its undo takes back
// items 1 and 2 only.
func TestBulkRescheduleEndToEnd(t *testing.T) {
	bt := newBulkTarget(t, 20)
	yaml, err := os.ReadFile(httpreqConfig(t, bt.srv.URL))
	must(t, err)
	srv := startService(t, serviceOpts{Config: string(yaml), Workers: 2,
		Env: map[string]string{"CAL_TOKEN": httpreqCred, "COUNTERSIGN_RECEIPT_KEYS": "k1:" + seedK1}})
	srv.APIKey = httpreqAPIKey
	bt.guard(t, srv.PublicURL)

	start := time.Now()
	st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, bulkBody(20, 10, 7, 19))
	prepared := time.Since(start)
	if st != 201 {
		t.Fatalf("prepare: %d %s", st, b)
	}
	v := decode[bulkView](t, b)
	if v.Preview.Title != "20 events on calendar: 18 moved, 2 deleted" {
		t.Fatalf("title = %q", v.Preview.Title)
	}
	// The prepare result is compact (SPEC §13); the whole preview is
	// what GET ?full=1 returns.
	_, b = srv.call(t, "GET", "/v1/operations/"+v.Key+"?full=1", srv.APIKey, "")
	items := map[int]bool{}
	for _, d := range decode[bulkView](t, b).Preview.Diff {
		items[d.Item] = true
	}
	if len(items) != 20 {
		t.Fatalf("the preview's diff covers %d items, want 20", len(items))
	}
	if st, b = srv.call(t, "POST", "/v1/operations/"+v.Key+"/send", srv.APIKey, ""); st != 202 {
		t.Fatalf("send: %d %s", st, b)
	}
	link := srv.consoleLink(t, v.Key, "grace")
	br := newBrowser()
	_, page, _ := br.do(t, "GET", link, nil)
	if n := strings.Count(page, `<div class="item"`); n != 20 || !strings.Contains(page, "DELETE /events/19 (deleted)") {
		t.Fatalf("the page shows %d items:\n%.2000s", n, page)
	}
	clicked := time.Now()
	if st, _ := br.decide(t, link, "approve", ""); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	done := decode[bulkView](t, waitRaw(t, srv, v.Key, "succeeded"))
	executed := time.Since(clicked)
	if done.Result.Written != 20 || len(done.Result.Items) != 20 {
		t.Fatalf("result = %+v", done.Result)
	}
	bt.mu.Lock()
	applied := append([]string(nil), bt.applied...)
	byKey := map[string]int{}
	for k, n := range bt.byKey {
		byKey[k] = n
	}
	bt.mu.Unlock()
	for i := 1; i <= 20; i++ {
		id := fmt.Sprintf("%s:%d", v.Key, i)
		if byKey[id] != 1 || applied[i-1] != id || done.Result.Items[i-1].ReceiptID != id {
			t.Fatalf("item %d: %d writes with its key, applied %v", i, byKey[id], applied)
		}
	}
	if bt.start(1) != "2026-06-01T10:00:00Z" || bt.start(7) != nil || bt.start(19) != nil {
		t.Fatalf("target after the bulk: event 1 starts %v, events 7 and 19: %v %v", bt.start(1), bt.start(7), bt.start(19))
	}
	st, evs := srv.call(t, "GET", "/v1/operations/"+v.Key+"/events", srv.APIKey, "")
	if st != 200 || !regexp.MustCompile(`"event":"succeeded"[^}]*"receipts":\["`+v.Key+`:1"`).Match(evs) {
		t.Fatalf("events: %d %s", st, evs)
	}
	t.Logf("20-item bulk: prepare %s (REST, 20 state reads), approve click to succeeded %s (20 re-reads, 20 writes, 18 post-write reads)",
		prepared.Round(time.Millisecond), executed.Round(time.Millisecond))

	// MCP: prepare_http_request takes items; its description says the bounds.
	cs := mcpHTTP(t, srv, httpreqAPIKey, &syncBuffer{})
	tools, err := cs.ListTools(context.Background(), nil)
	must(t, err)
	for _, tl := range tools.Tools {
		if tl.Name == mcpserver.ToolPrepareHTTPRequest && (!strings.Contains(tl.Description, "at most 100") || !strings.Contains(tl.Description, "one target")) {
			t.Errorf("prepare_http_request's description does not state the bulk's bounds: %s", tl.Description)
		}
	}
	var mcpItems []map[string]any
	for i := 8; i <= 10; i++ {
		mcpItems = append(mcpItems, map[string]any{"method": "PATCH", "path": fmt.Sprintf("/events/%d", i), "body": map[string]any{"title": "Moved to Tuesday"}})
	}
	mo := mcpOK(t, cs, mcpserver.ToolPrepareHTTPRequest, map[string]any{"target": "calendar", "items": mcpItems})
	if mo.op.Preview.Title != "3 events on calendar: 3 changed" || mo.op.Status != approval.StatusDraft {
		t.Fatalf("MCP bulk: %q %s", mo.op.Preview.Title, mo.op.Status)
	}
	mcpFails(t, cs, mcpserver.ToolPrepareHTTPRequest, map[string]any{"target": "calendar", "method": "PATCH", "items": mcpItems}, approval.CodeInvalidInput)
	mcpOK(t, cs, mcpserver.ToolCancelOperation, map[string]any{"operation_key": mo.op.OperationKey})

	// A bulk that fails at item 3: partial, then undo of items 1 and 2.
	bt.mu.Lock()
	bt.failPath = "/api/events/3"
	bt.mu.Unlock()
	o := srv.prepareSend(t, bulkBody(5, 11))
	if st, _ := newBrowser().decide(t, srv.consoleLink(t, o.Key, "grace"), "approve", ""); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	failed := decode[bulkView](t, waitRaw(t, srv, o.Key, "failed"))
	if failed.Error == nil || failed.Error.Code != "execution_failed" || failed.Error.Details["partial"] != true ||
		failed.Result.Written != 2 || failed.Result.NotAttempted != 2 || !strings.Contains(failed.NextStep, "Partly done") {
		t.Fatalf("partial bulk: %+v %+v %q", failed.Error, failed.Result, failed.NextStep)
	}
	bt.mu.Lock()
	bt.failPath = ""
	bt.mu.Unlock()
	if bt.start(2) != "2026-06-01T11:00:00Z" || bt.start(3) != "2026-06-01T10:00:00Z" {
		t.Fatalf("after the partial bulk: event 2 starts %v, event 3 %v", bt.start(2), bt.start(3))
	}
	st, b = srv.call(t, "POST", "/v1/operations/"+o.Key+"/undo", srv.APIKey, "")
	if st != 201 {
		t.Fatalf("undo: %d %s", st, b)
	}
	undo := decode[bulkView](t, b)
	if undo.Preview.Title != "2 events on calendar: 2 moved" {
		t.Fatalf("undo title = %q", undo.Preview.Title)
	}
	if st, b = srv.call(t, "POST", "/v1/operations/"+undo.Key+"/send", srv.APIKey, ""); st != 202 {
		t.Fatalf("send undo: %d %s", st, b)
	}
	if st, _ := newBrowser().decide(t, srv.consoleLink(t, undo.Key, "grace"), "approve", ""); st != 200 {
		t.Fatalf("approve undo: %d", st)
	}
	srv.waitFor(t, undo.Key, "succeeded")
	for i := 1; i <= 5; i++ { // 1 and 2 written back; 3 to 5 never written by the second bulk
		if got := bt.start(i); got != "2026-06-01T10:00:00Z" {
			t.Errorf("event %d starts %v after the undo, want 10:00", i, got)
		}
	}
}

// waitRaw long-polls until the operation reaches status, and returns its
// whole view.
func waitRaw(t testing.TB, s *testService, key, status string) []byte {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, b := s.call(t, "GET", "/v1/operations/"+key+"?wait=5", s.APIKey, "")
		if st != 200 {
			t.Fatalf("status: %d %s", st, b)
		}
		if o := decode[op](t, b); o.Status == status {
			return b
		} else if time.Now().After(deadline) {
			t.Fatalf("operation %s is %s, want %s", key, o.Status, status)
		}
	}
}

// TestBrowserBulkPage: in Chromium, on a phone, the page of a 20-item bulk
// shows every item with its diff in the page flow (no inner scroll box),
// its Approve in the bar waits until the end has been on screen, and one
// press there runs all 20 writes.
func TestBrowserBulkPage(t *testing.T) {
	chromium := browsertest.Start(t)
	bt := newBulkTarget(t, 20)
	yaml, err := os.ReadFile(httpreqConfig(t, bt.srv.URL))
	must(t, err)
	srv := startService(t, serviceOpts{Config: string(yaml), Env: map[string]string{"CAL_TOKEN": httpreqCred}})
	srv.APIKey = httpreqAPIKey
	h := http.Handler(http.HandlerFunc(bt.api))
	bt.mw.Store(&h) // no receipts configured here: the API alone
	o := srv.prepareSend(t, bulkBody(20, 10, 7, 19))
	link := srv.consoleLink(t, o.Key, "grace")

	p := chromium.NewPage(t, browsertest.Phone)
	p.Navigate(link)
	if r := p.LastResponse(); r.Status != 200 {
		t.Fatalf("HTTP %d", r.Status)
	}
	var v struct {
		Items, Rows, InnerScroll int
		Last                     string
	}
	p.Eval(`(() => {
		const items = [...document.querySelectorAll("#items .item")];
		const scrollers = [...document.querySelectorAll("pre, td, dd, .item")].filter(e => e.scrollHeight > e.clientHeight + 2 && getComputedStyle(e).overflowY !== "visible");
		return {Items: items.length, Rows: document.querySelectorAll("#items table.diff tbody tr").length,
			InnerScroll: scrollers.length, Last: items.length ? items[items.length-1].innerText : ""};
	})()`, &v)
	// 18 moves of 2 fields, 2 deletes of 3 bound fields.
	if v.Items != 20 || v.Rows != 18*2+2*3 || v.InnerScroll != 0 || !strings.Contains(v.Last, "Item 20") {
		t.Fatalf("page: %+v", v)
	}
	if !strings.Contains(p.Text(), "20 events on calendar: 18 moved, 2 deleted") {
		t.Fatalf("no summary in:\n%.1500s", p.Text())
	}
	if p.Bool(`getComputedStyle(document.querySelector("#bar-approve")).visibility === "visible"`) {
		t.Fatal("the bar offers Approve before the end of the 20 items was on screen")
	}
	saveScreenshotViewport(t, p, "bulk-phone-first-screen.png")
	p.Eval(`(document.querySelector("#item-6").scrollIntoView({block: "start", behavior: "instant"}), true)`, nil)
	saveScreenshotViewport(t, p, "bulk-phone-items.png")
	p.Eval(`(document.querySelector("#end-of-content").scrollIntoView({block: "center", behavior: "instant"}), true)`, nil)
	p.WaitFor(`getComputedStyle(document.querySelector("#bar-approve")).visibility === "visible"`, 5*time.Second)
	checkNoCSPViolations(t, p)
	p.ClickAndWait("#bar-approve")
	if got := p.TextContent("#notice"); got != "You approved it." {
		t.Fatalf("after Approve: %q", got)
	}
	srv.waitFor(t, o.Key, "succeeded")
	bt.mu.Lock()
	n := len(bt.applied)
	bt.mu.Unlock()
	if n != 20 {
		t.Fatalf("%d writes applied, want 20", n)
	}
}
