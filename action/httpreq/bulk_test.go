package httpreq_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
)

// Bulk http.request (SPEC §10) against the fake target: per-resource
// ETags, If-Match answered with 412, writes recorded with their
// Idempotency-Key.

func eventAt(i int) string { return fmt.Sprintf("/api/events/%d", i) }

func eventDoc(i int) map[string]any {
	return map[string]any{"title": fmt.Sprintf("Event %d", i), "start": "2025-06-02T09:00:00Z",
		"end": "2025-06-02T09:30:00Z", "owner": "sam"}
}

// putEvents creates events 1..n on the target.
func putEvents(f *fakeTarget, n int) {
	for i := 1; i <= n; i++ {
		f.put(eventAt(i), eventDoc(i))
	}
}

// moveItem moves event i by an hour; deleteItem deletes it.
func moveItem(i int) string {
	return fmt.Sprintf(`{"method":"PATCH","path":"/events/%d","body":{"start":"2025-06-02T10:00:00Z","end":"2025-06-02T10:30:00Z"}}`, i)
}
func deleteItem(i int) string { return fmt.Sprintf(`{"method":"DELETE","path":"/events/%d"}`, i) }

// reschedule is a bulk moving events 1..n, deleting those in deletes.
func reschedule(n int, deletes ...int) string {
	items := make([]string, n)
	for i := 1; i <= n; i++ {
		items[i-1] = moveItem(i)
		if slices.Contains(deletes, i) {
			items[i-1] = deleteItem(i)
		}
	}
	return `{"target":"calendar","items":[` + strings.Join(items, ",") + `]}`
}

// writesByKey counts the writes that reached the target per Idempotency-Key.
func writesByKey(f *fakeTarget) map[string]int {
	out := map[string]int{}
	for _, w := range f.writes() {
		out[w.IdempotencyKey]++
	}
	return out
}

func TestBulkPreviewSummarizesAndShowsEveryItemsDiff(t *testing.T) {
	f := newFakeTarget(t, true)
	putEvents(f, 20)
	a := newAction(t, calendarTarget(f))
	p := prepare(t, a, reschedule(20, 7, 19))

	if got, want := p.Preview.Title, "20 events on calendar: 18 moved, 2 deleted"; got != want {
		t.Fatalf("title = %q, want %q", got, want)
	}
	if !strings.HasPrefix(p.Preview.Summary, "20 events: 18 moved, 2 deleted.") {
		t.Fatalf("summary = %q", p.Preview.Summary)
	}
	if !slices.Contains(p.Preview.Warnings, "irreversible") || slices.Contains(p.Preview.Warnings, "no_etag") {
		t.Fatalf("warnings = %v", p.Preview.Warnings)
	}
	heads := map[int]string{}
	for _, fl := range p.Preview.Fields {
		if fl.Name == "item" {
			heads[fl.Item] = fl.Value
		}
	}
	if len(heads) != 20 || heads[3] != "PATCH /events/3 (moved)" || heads[7] != "DELETE /events/7 (deleted)" {
		t.Fatalf("item headings = %v", heads)
	}
	rows := map[int][]approval.Change{}
	for _, c := range p.Preview.Diff {
		rows[c.Item] = append(rows[c.Item], c)
	}
	if len(rows) != 20 {
		t.Fatalf("diff covers %d items, want every one of 20", len(rows))
	}
	if r := rows[3]; len(r) != 2 || r[0].Field != "end" || string(r[0].Before) != `"2025-06-02T09:30:00Z"` || string(r[1].After) != `"2025-06-02T10:00:00Z"` {
		t.Fatalf("item 3 diff = %s", mustJSON(t, r))
	}
	if r := rows[7]; len(r) != 3 || r[0].After != nil { // DELETE: each bound field goes away
		t.Fatalf("item 7 diff = %s", mustJSON(t, r))
	}
	// One binding per item, each with its own ETag, under one state hash.
	var st struct {
		Items []struct {
			N    int    `json:"n"`
			Hash string `json:"hash"`
			ETag string `json:"etag"`
		} `json:"items"`
	}
	if err := json.Unmarshal(p.State.Snapshot, &st); err != nil || len(st.Items) != 20 {
		t.Fatalf("state = %s (%v)", p.State.Snapshot, err)
	}
	if st.Items[4].N != 5 || st.Items[4].ETag != `"v1"` || st.Items[4].Hash == st.Items[5].Hash && st.Items[4].Hash == "" {
		t.Fatalf("item 5 binding = %+v", st.Items[4])
	}
	if p.Attrs["items"] != "20" || p.Attrs["target"] != "calendar" {
		t.Fatalf("attrs = %v", p.Attrs)
	}
	if len(f.writes()) != 0 {
		t.Fatal("prepare wrote to the target")
	}
	if gets := len(f.requests()); gets != 20 {
		t.Fatalf("%d state reads, want one per item", gets)
	}
}

// TestBulkAttrsFailClosed: attributes the items agree on are reported as
// they are; where they differ the attribute is opaque, so a route keyed on
// it is taken (a DELETE hidden among PATCHes lands on the DELETE route).
func TestBulkAttrsFailClosed(t *testing.T) {
	same, err := httpreq.SampleAttrs(json.RawMessage(reschedule(3)))
	if err != nil {
		t.Fatal(err)
	}
	if same["method"] != "PATCH" || same["body.start"] != "2025-06-02T10:00:00Z" || same["items"] != "3" {
		t.Fatalf("attrs of agreeing items = %v", same)
	}
	mixed, err := httpreq.SampleAttrs(json.RawMessage(reschedule(3, 2)))
	if err != nil {
		t.Fatal(err)
	}
	route := approval.Match{Action: httpreq.Name, When: []approval.Condition{{Attr: "method", Op: approval.OpEq, Values: []string{"DELETE"}}}}
	if ok, why := route.Check(httpreq.Name, "agent", mixed); !ok {
		t.Fatalf("a bulk with a DELETE passed over the DELETE route: %s", why)
	}
	if ok, _ := route.Check(httpreq.Name, "agent", same); ok {
		t.Fatal("a bulk of PATCHes was taken by the DELETE route")
	}
	for _, k := range []string{"method", "path", "body.start"} {
		if v := mixed[k]; !strings.Contains(approval.DescribeAttrValue(v), "differs") {
			t.Errorf("%s = %q, want opaque (differs between the items)", k, v)
		}
	}
}

func TestBulkOneStaleItemWritesNothing(t *testing.T) {
	e := newSvcEnv(t, true)
	putEvents(e.target, 5)
	op := e.prepare(t, httpreq.Name, reschedule(5))
	e.approve(t, e.send(t, op.Key))
	e.target.change(eventAt(3), "title", "Renamed by someone")

	cur := e.run(t, op.Key)
	wantFailed(t, cur, approval.CodeStaleState)
	if n := len(e.target.writes()); n != 0 {
		t.Fatalf("%d writes reached the target; a stale item must stop every write", n)
	}
	d := cur.Error.Details
	if got := mustJSON(t, d["stale_items"]); got != "[3]" {
		t.Fatalf("stale_items = %s", got)
	}
	changed := approval.StaleChanges(cur.Error)
	if len(changed) != 1 || changed[0].Item != 3 || changed[0].Field != "title" || string(changed[0].After) != `"Renamed by someone"` {
		t.Fatalf("changed = %s", mustJSON(t, changed))
	}
	if !strings.Contains(cur.Error.Message, "item 3: title") || !strings.Contains(cur.Error.Message, "nothing was written") {
		t.Fatalf("message = %q", cur.Error.Message)
	}
	m := approval.BuildMessage(cur, e.svc.Policy(), e.svc.Now())
	if si := m.StaleItems(); len(si) != 1 || si[0].N != 3 {
		t.Fatalf("message stale items = %+v", si)
	}
}

// TestBulkMidwayFailureIsPartialThenUndoRestoresOnlyWritten: item 3 of 5
// fails with a 500; items 1 and 2 are written, 4 and 5 are not attempted;
// the operation is failed, partial, with the counts; undo takes back items
// 1 and 2 only.
func TestBulkMidwayFailureIsPartialThenUndoRestoresOnlyWritten(t *testing.T) {
	e := newSvcEnv(t, true)
	putEvents(e.target, 5)
	op := e.prepare(t, httpreq.Name, reschedule(5))
	e.approve(t, e.send(t, op.Key))
	e.target.mu.Lock()
	e.target.override = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPatch && r.URL.Path == eventAt(3) {
			w.WriteHeader(http.StatusInternalServerError)
			return true
		}
		return false
	}
	e.target.mu.Unlock()

	cur := e.run(t, op.Key)
	wantFailed(t, cur, approval.CodeExecutionFailed)
	if u := cur.Error.OutcomeUnknown; u == nil || *u {
		t.Fatalf("outcome_unknown = %v, want false (the target answered 500)", u)
	}
	d := cur.Error.Details
	if d["partial"] != true || num(d["written"]) != 2 || num(d["failed"]) != 1 || num(d["not_attempted"]) != 2 || num(d["item"]) != 3 {
		t.Fatalf("error details = %v", d)
	}
	var res httpreq.BulkResult
	if err := json.Unmarshal(cur.Result, &res); err != nil {
		t.Fatalf("result %s: %v", cur.Result, err)
	}
	var outcomes []string
	for _, it := range res.Items {
		outcomes = append(outcomes, it.Outcome)
	}
	if got, want := strings.Join(outcomes, ","), "written,written,failed,not_attempted,not_attempted"; got != want {
		t.Fatalf("outcomes = %s, want %s", got, want)
	}
	if it := res.Items[2]; it.Status != 500 || it.OutcomeUnknown == nil || *it.OutcomeUnknown || it.Error == nil {
		t.Fatalf("item 3 = %+v", it)
	}
	keys := writesByKey(e.target)
	for n, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 0, 5: 0} {
		if got := keys[fmt.Sprintf("%s:%d", op.Key, n)]; got != want {
			t.Errorf("writes with Idempotency-Key %s:%d = %d, want %d", op.Key, n, got, want)
		}
	}
	if v := approval.AgentView(cur, e.svc.Now()); !strings.Contains(v.NextStep, "Partly done") || !strings.Contains(v.NextStep, "prepare_undo") {
		t.Fatalf("next_step = %q", v.NextStep)
	}

	// Undo: the inverse of items 1 and 2 only, each bound to its post-write state.
	e.target.mu.Lock()
	e.target.override = nil
	e.target.mu.Unlock()
	undo, created, err := e.svc.PrepareUndo(bg, e.agent, op.Key)
	if err != nil || !created {
		t.Fatalf("prepare undo: %v", err)
	}
	var in struct {
		Items []struct {
			Method, Path string
			Body         map[string]any
		}
	}
	if err := json.Unmarshal(undo.Input, &in); err != nil || len(in.Items) != 2 || in.Items[0].Path != "/events/1" || in.Items[1].Path != "/events/2" {
		t.Fatalf("undo input = %s", undo.Input)
	}
	if in.Items[0].Body["start"] != "2025-06-02T09:00:00Z" {
		t.Fatalf("undo body = %v", in.Items[0].Body)
	}
	if !strings.HasPrefix(undo.Preview.Title, "2 events on calendar: 2 moved") {
		t.Fatalf("undo title = %q", undo.Preview.Title)
	}
	e.approve(t, e.send(t, undo.Key))
	if done := e.run(t, undo.Key); done.Status != approval.StatusSucceeded {
		t.Fatalf("undo: %s %+v", done.Status, done.Error)
	}
	for i := 1; i <= 5; i++ {
		if got := e.target.doc(eventAt(i))["start"]; got != "2025-06-02T09:00:00Z" {
			t.Errorf("event %d start = %v after the undo, want the original", i, got)
		}
	}
	if n := writesByKey(e.target)[undo.Key+":3"]; n != 0 {
		t.Fatal("the undo wrote an item the bulk had not written")
	}
}

// TestBulkUndoRefusedWhenAWrittenItemChanged: the undo of a bulk is
// refused with stale_state naming the item changed since the write.
func TestBulkUndoRefusedWhenAWrittenItemChanged(t *testing.T) {
	e := newSvcEnv(t, true)
	putEvents(e.target, 3)
	op := e.prepare(t, httpreq.Name, reschedule(3))
	e.approve(t, e.send(t, op.Key))
	if done := e.run(t, op.Key); done.Status != approval.StatusSucceeded {
		t.Fatalf("bulk: %s %+v", done.Status, done.Error)
	}
	e.target.change(eventAt(2), "start", "2025-06-02T11:00:00Z")
	_, _, err := e.svc.PrepareUndo(bg, e.agent, op.Key)
	ce := codedErr(t, err)
	if ce.Code != approval.CodeStaleState || mustJSON(t, ce.Details["stale_items"]) != "[2]" || !strings.Contains(ce.Message, "undo is refused") {
		t.Fatalf("undo of a changed bulk: %v %v", ce, ce.Details)
	}
}

// TestBulkIfMatchRefusalMidwayStopsTheRest: the resource of item 2
// changes between the re-read and its write; its If-Match gets a 412; the
// operation is precondition_failed, partial (item 1 was written), and
// items 3 and 4 are not attempted.
func TestBulkIfMatchRefusalMidwayStopsTheRest(t *testing.T) {
	e := newSvcEnv(t, true)
	putEvents(e.target, 4)
	op := e.prepare(t, httpreq.Name, reschedule(4))
	e.approve(t, e.send(t, op.Key))
	e.target.mu.Lock()
	e.target.override = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPatch && r.URL.Path == eventAt(1) {
			// Someone edits event 2 while item 1 is written.
			e.target.change(eventAt(2), "title", "Edited meanwhile")
		}
		return false
	}
	e.target.mu.Unlock()
	cur := e.run(t, op.Key)
	wantFailed(t, cur, approval.CodePreconditionFailed)
	var res httpreq.BulkResult
	_ = json.Unmarshal(cur.Result, &res)
	if res.Written != 1 || res.Items[1].Outcome != httpreq.OutcomeRefused || res.Items[1].Status != 412 || res.NotAttempted != 2 {
		t.Fatalf("result = %s", cur.Result)
	}
	if cur.Error.Details["partial"] != true {
		t.Fatalf("details = %v", cur.Error.Details)
	}
	if got := e.target.doc(eventAt(2))["title"]; got != "Edited meanwhile" {
		t.Fatalf("event 2 title = %v: the other change was overwritten", got)
	}
}

func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	}
	return -1
}

// TestBulkUnknownOutcomeIsPerItem: item 2's write goes out and no answer
// comes back in time: item 2 is failed with outcome_unknown true (it may
// have happened), item 1 written, item 3 not attempted, and the operation's
// error says the same (execution_failed, outcome_unknown, partial).
func TestBulkUnknownOutcomeIsPerItem(t *testing.T) {
	f := newFakeTarget(t, true)
	putEvents(f, 3)
	tg := calendarTarget(f)
	tg.Timeout = 300 * time.Millisecond
	a := newAction(t, tg)
	p := prepare(t, a, reschedule(3))
	op := opOf(t, p)
	f.mu.Lock()
	f.override = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPatch && r.URL.Path == eventAt(2) {
			time.Sleep(500 * time.Millisecond) // past the target's timeout
			return true
		}
		return false
	}
	f.mu.Unlock()
	out, err := a.Execute(bg, op)
	ee := execErr(t, err)
	if ee.Code != approval.CodeExecutionFailed || !ee.OutcomeUnknown || ee.Details["partial"] != true {
		t.Fatalf("error = %+v", ee)
	}
	var res httpreq.BulkResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("result %s: %v", out, err)
	}
	it := res.Items[1]
	if res.Items[0].Outcome != httpreq.OutcomeWritten || it.Outcome != httpreq.OutcomeFailed || it.OutcomeUnknown == nil || !*it.OutcomeUnknown ||
		res.Items[2].Outcome != httpreq.OutcomeNotAttempted {
		t.Fatalf("result = %s", out)
	}
	if !strings.Contains(ee.Message, "may or may not have been applied") || !strings.Contains(ee.Message, op.Key+":2") {
		t.Fatalf("message = %q", ee.Message)
	}
	t.Logf("%s", ee.Message)
}
