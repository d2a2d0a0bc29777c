package httpreq_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/testing/testkit"
	"github.com/klauspost/compress/zstd"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// svcEnv is the approval service with the real store, the http.request
// action, and a fake target: the path an operation takes in production,
// driven step by step (Reconcile stands in for the workers).
type svcEnv struct {
	svc    *approval.Service
	store  *store.Redis
	rdb    redis.UniversalClient
	target *fakeTarget
	action *httpreq.Action
	agent  *approval.Principal
	inbox  *inbox
	logs   *syncBuffer

	mu     sync.Mutex
	events []approval.Event
}

type syncBuffer = testkit.Buffer

// inbox keeps the notices the console channel would print.
type inbox struct {
	mu      sync.Mutex
	notices []approval.Notice
}

func (b *inbox) Notify(_ context.Context, n approval.Notice) (map[string]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notices = append(b.notices, n)
	return nil, nil
}

// link is the approval link token of the last notice for op.
func (b *inbox) link(t *testing.T, op string) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.notices) - 1; i >= 0; i-- {
		if n := b.notices[i]; n.Message.OperationKey == op && n.Link != "" {
			_, tok, _ := strings.Cut(n.Link, "/a/")
			return tok
		}
	}
	t.Fatalf("no approval link for %s", op)
	return ""
}

// emailLike is an action that cannot be undone (like email.send).
type emailLike struct{}

func (emailLike) Name() string { return "email.send" }
func (emailLike) Prepare(context.Context, approval.PrepareRequest) (*approval.Prepared, error) {
	return &approval.Prepared{Input: map[string]string{"to": "a@client.example"}, Preview: approval.Preview{Title: "Email"}}, nil
}
func (emailLike) Execute(context.Context, *approval.Operation) (json.RawMessage, error) {
	return json.RawMessage(`{"message_id":"<x@y>"}`), nil
}

func newSvcEnv(t *testing.T, etags bool) *svcEnv {
	t.Helper()
	return newSvcEnvWith(t, etags, nil)
}

// newSvcEnvWith is newSvcEnv with the target adjusted by adjust.
func newSvcEnvWith(t *testing.T, etags bool, adjust func(*httpreq.Target)) *svcEnv {
	t.Helper()
	f := newFakeTarget(t, etags)
	f.put(eventPath, event())
	rdb := redistest.Start(t).Client(t)
	e := &svcEnv{store: store.New(rdb, nil), rdb: rdb, target: f, inbox: &inbox{}, logs: &syncBuffer{},
		agent: &approval.Principal{ID: "agent", Scopes: []string{"http.request:calendar", "email.send"}, OnBehalfOf: "sam"}}
	t.Cleanup(func() { _ = e.store.Close() })
	tg := calendarTarget(f)
	if adjust != nil {
		adjust(&tg)
	}
	e.action = newAction(t, tg)
	policy := &approval.Policy{
		Principals: []*approval.Principal{e.agent},
		Approvers:  []*approval.Approver{{ID: "grace", Name: "Grace Park", Email: "grace@example.com"}},
		Routes: []approval.RouteRule{{Name: "calendar", Match: approval.Match{},
			ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}}},
	}
	svc, err := approval.NewService(approval.Config{
		Store: e.store, Policy: policy, Actions: []approval.Action{e.action, emailLike{}},
		Notifiers: map[string]approval.Notifier{"console": e.inbox}, Links: approval.RandomKeyring(),
		PublicURL: "http://countersign.test", Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnEvent: []func(approval.Event){func(ev approval.Event) { e.mu.Lock(); e.events = append(e.events, ev); e.mu.Unlock() }},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

func (e *svcEnv) prepare(t *testing.T, action, input string) *approval.Operation {
	t.Helper()
	op, _, err := e.svc.Prepare(bg, e.agent, approval.PrepareCall{Action: action, Input: json.RawMessage(input)})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	return op
}

// send sends op for approval, delivers its notice, and returns the link.
func (e *svcEnv) send(t *testing.T, key string) string {
	t.Helper()
	if _, err := e.svc.Send(bg, e.agent, key); err != nil {
		t.Fatalf("send: %v", err)
	}
	if err := e.svc.Reconcile(bg, approval.Ref{Principal: e.agent.ID, Key: key}); err != nil {
		t.Fatalf("deliver: %v", err)
	}
	return e.inbox.link(t, key)
}

// approve is the human pressing Approve on the page.
func (e *svcEnv) approve(t *testing.T, link string) (*approval.LinkView, approval.DecideResult) {
	t.Helper()
	v, res, err := e.svc.DecideByLink(bg, link, true, "")
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	return v, res
}

// run is a worker picking the operation up.
func (e *svcEnv) run(t *testing.T, key string) *approval.Operation {
	t.Helper()
	if err := e.svc.Reconcile(bg, approval.Ref{Principal: e.agent.ID, Key: key}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	op, err := e.svc.Get(bg, e.agent, key)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

const patchTitle = `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"Retro","time":{"zone":"CET"}}}`

func wantFailed(t *testing.T, op *approval.Operation, code approval.Code) {
	t.Helper()
	if op.Status != approval.StatusFailed || op.Error == nil || op.Error.Code != code {
		t.Fatalf("status %s error %+v, want failed with %s", op.Status, op.Error, code)
	}
}

// currentValue reads error.details.current[field] as stored.
func currentValue(t *testing.T, op *approval.Operation, field string) string {
	t.Helper()
	cur, ok := op.Error.Details["current"].(map[string]any)
	if !ok {
		t.Fatalf("error.details.current missing: %v", op.Error.Details)
	}
	b, _ := json.Marshal(cur[field])
	return string(b)
}

// Stale 1: preview, change, the human presses Approve: the page's
// re-check finds the change, no approval is recorded, nothing is written.
func TestStale_ChangedAfterPreview_ApproveIsRefusedAndNothingWritten(t *testing.T) {
	e := newSvcEnv(t, true)
	op := e.prepare(t, httpreq.Name, patchTitle)
	link := e.send(t, op.Key)
	if v, err := e.svc.OpenLink(bg, link); err != nil || v.Stale != nil || v.Problem != approval.LinkOK {
		t.Fatalf("page before the change: %v %v %v", v.Problem, v.Stale, err)
	}
	e.target.change(eventPath, "start", "11:30")

	_, res := e.approve(t, link)
	if res.Outcome == approval.DecideApproved || res.Outcome == approval.DecideRecorded {
		t.Fatalf("approval recorded on a stale operation: %v", res.Outcome)
	}
	cur := e.run(t, op.Key)
	wantFailed(t, cur, approval.CodeStaleState)
	if got, want := currentValue(t, cur, "start"), `"11:30"`; got != want {
		t.Fatalf("details.current.start = %s, want %s", got, want)
	}
	if len(cur.Approvals) != 0 {
		t.Fatalf("approvals = %v", cur.Approvals)
	}
	if n := len(e.target.writes()); n != 0 {
		t.Fatalf("%d writes reached the target", n)
	}
	if v := approval.AgentView(cur, e.svc.Now()); !strings.Contains(v.NextStep, "Prepare it again") {
		t.Fatalf("next_step = %q", v.NextStep)
	}
}

// Stale 2: the human opens the page after the change: the page is told
// (LinkView.Stale), the operation fails at once, and a later POST cannot
// approve it.
func TestStale_PageOpenedAfterChange_ReportsStaleAndFailsOperation(t *testing.T) {
	e := newSvcEnv(t, true)
	op := e.prepare(t, httpreq.Name, patchTitle)
	link := e.send(t, op.Key)
	e.target.change(eventPath, "title", "Planning")

	v, err := e.svc.OpenLink(bg, link)
	if err != nil {
		t.Fatal(err)
	}
	var ee *approval.ExecError
	if v.Stale == nil || !asExec(v.Stale, &ee) || ee.Code != approval.CodeStaleState {
		t.Fatalf("LinkView.Stale = %v, want a stale_state error", v.Stale)
	}
	changed, _ := ee.Details["changed"].([]approval.Change)
	if len(changed) != 1 || changed[0].Field != "title" || string(changed[0].After) != `"Planning"` {
		t.Fatalf("changed = %s", mustJSON(t, ee.Details["changed"]))
	}
	cur, _ := e.svc.Get(bg, e.agent, op.Key)
	wantFailed(t, cur, approval.CodeStaleState)
	if got, want := currentValue(t, cur, "title"), `"Planning"`; got != want {
		t.Fatalf("details.current.title = %s, want %s", got, want)
	}
	if _, res := e.approve(t, link); res.Outcome == approval.DecideApproved {
		t.Fatal("a stale operation was approved")
	}
	if n := len(e.target.writes()); n != 0 {
		t.Fatalf("%d writes reached the target", n)
	}
}

func asExec(err error, ee **approval.ExecError) bool {
	x, ok := err.(*approval.ExecError)
	*ee = x
	return ok
}

// Stale 3: the change lands after the approval, before the worker runs:
// the re-read before the write finds it; no write is sent.
func TestStale_ChangedAfterApproval_RereadRefusesWrite(t *testing.T) {
	e := newSvcEnv(t, true)
	op := e.prepare(t, httpreq.Name, patchTitle)
	link := e.send(t, op.Key)
	if _, res := e.approve(t, link); res.Outcome != approval.DecideApproved {
		t.Fatalf("outcome %v", res.Outcome)
	}
	e.target.change(eventPath, "end", "10:00")
	cur := e.run(t, op.Key)
	wantFailed(t, cur, approval.CodeStaleState)
	if got, want := currentValue(t, cur, "end"), `"10:00"`; got != want {
		t.Fatalf("details.current.end = %s, want %s", got, want)
	}
	if n := len(e.target.writes()); n != 0 {
		t.Fatalf("%d writes reached the target", n)
	}
}

// TOCTOU 1: the change lands between the re-read and the write. The
// re-read passes; the write carries If-Match with the prepare-time ETag;
// the target refuses it with 412; the operation ends precondition_failed
// and the other party's change survives.
func TestTOCTOU_ChangeBetweenRereadAndWrite_IfMatchGets412(t *testing.T) {
	e := newSvcEnv(t, true)
	op := e.prepare(t, httpreq.Name, patchTitle)
	link := e.send(t, op.Key)
	if _, res := e.approve(t, link); res.Outcome != approval.DecideApproved {
		t.Fatalf("outcome %v", res.Outcome)
	}
	e.target.mu.Lock()
	e.target.afterGet = func(f *fakeTarget, path string) { f.change(path, "title", "Changed in the window") }
	e.target.mu.Unlock()

	cur := e.run(t, op.Key)
	wantFailed(t, cur, approval.CodePreconditionFailed)
	w := e.target.writes()
	if len(w) != 1 || w[0].IfMatch != op.State.ETag || w[0].IdempotencyKey != op.Key {
		t.Fatalf("writes = %+v, want one conditional write with If-Match %s", w, op.State.ETag)
	}
	if got := e.target.doc(eventPath)["title"]; got != "Changed in the window" {
		t.Fatalf("title = %v: the other change was overwritten", got)
	}
	if v := approval.AgentView(cur, e.svc.Now()); !strings.Contains(v.NextStep, "Prepare it again") {
		t.Fatalf("next_step = %q", v.NextStep)
	}
}

// Stale 4: a target without ETags: the re-read still protects.
func TestStale_NoETagTarget_RereadStillProtects(t *testing.T) {
	e := newSvcEnv(t, false)
	op := e.prepare(t, httpreq.Name, patchTitle)
	if op.State == nil || op.State.ETag != "" {
		t.Fatalf("state = %+v, want a binding without ETag", op.State)
	}
	if !strings.Contains(strings.Join(op.Preview.Warnings, ","), "no_etag") {
		t.Fatalf("warnings = %v, want no_etag", op.Preview.Warnings)
	}
	link := e.send(t, op.Key)
	if _, res := e.approve(t, link); res.Outcome != approval.DecideApproved {
		t.Fatalf("outcome %v", res.Outcome)
	}
	e.target.change(eventPath, "title", "Planning")
	cur := e.run(t, op.Key)
	wantFailed(t, cur, approval.CodeStaleState)
	if n := len(e.target.writes()); n != 0 {
		t.Fatalf("%d writes reached the target", n)
	}
	if w := e.target.requests(); len(w) > 0 && w[len(w)-1].IfMatch != "" {
		t.Fatal("If-Match sent without an ETag")
	}
}

// TOCTOU 2: without ETags the window between re-read and write cannot be
// closed by the target; the preview says so (no_etag), and the write is
// sent without If-Match. This pins the documented limit.
func TestTOCTOU_NoETagTarget_WindowIsDisclosedInPreview(t *testing.T) {
	e := newSvcEnv(t, false)
	op := e.prepare(t, httpreq.Name, patchTitle)
	if !strings.Contains(op.Preview.Summary, "a change in the very last instant cannot be caught") || !slices.Contains(op.Preview.Warnings, "no_etag") {
		t.Fatalf("summary = %q, warnings %q: want the no-ETag limit stated", op.Preview.Summary, op.Preview.Warnings)
	}
	if f := op.Preview.Fields[len(op.Preview.Fields)-1]; !f.Technical || !strings.Contains(f.Value, "without If-Match") {
		t.Fatalf("the technical detail is not kept: %+v", f)
	}
	link := e.send(t, op.Key)
	e.approve(t, link)
	e.target.mu.Lock()
	e.target.afterGet = func(f *fakeTarget, path string) { f.change(path, "owner", "grace") }
	e.target.mu.Unlock()
	cur := e.run(t, op.Key)
	if cur.Status != approval.StatusSucceeded {
		t.Fatalf("status %s", cur.Status)
	}
	if w := e.target.writes(); len(w) != 1 || w[0].IfMatch != "" {
		t.Fatalf("writes = %+v", w)
	}
}

// Stale 5: the resource is deleted after the approval.
func TestStale_ResourceDeletedBeforeExecution(t *testing.T) {
	e := newSvcEnv(t, true)
	op := e.prepare(t, httpreq.Name, patchTitle)
	e.approve(t, e.send(t, op.Key))
	e.target.mu.Lock()
	delete(e.target.docs, eventPath)
	e.target.mu.Unlock()
	cur := e.run(t, op.Key)
	wantFailed(t, cur, approval.CodeStaleState)
	if cur.Error.Details["reason"] != "gone" {
		t.Fatalf("details = %v", cur.Error.Details)
	}
	if n := len(e.target.writes()); n != 0 {
		t.Fatalf("%d writes", n)
	}
}

func TestHappyPathThenUndo(t *testing.T) {
	e := newSvcEnv(t, true)
	op := e.prepare(t, httpreq.Name, patchTitle)
	e.approve(t, e.send(t, op.Key))
	done := e.run(t, op.Key)
	if done.Status != approval.StatusSucceeded {
		t.Fatalf("status %s error %+v", done.Status, done.Error)
	}
	if got := e.target.doc(eventPath); got["title"] != "Retro" || got["time"].(map[string]any)["zone"] != "CET" {
		t.Fatalf("resource after write = %v", got)
	}
	var res httpreq.Result
	if err := json.Unmarshal(done.Result, &res); err != nil || res.Status != 200 || res.PostStateHash == "" {
		t.Fatalf("result = %s", done.Result)
	}

	undo, created, err := e.svc.PrepareUndo(bg, e.agent, op.Key)
	if err != nil || !created {
		t.Fatalf("prepare undo: %v %v", err, created)
	}
	if undo.Undoes != op.Key || undo.Status != approval.StatusDraft {
		t.Fatalf("undo = %+v", undo)
	}
	if orig, _ := e.svc.Get(bg, e.agent, op.Key); orig.UndoneBy != undo.Key {
		t.Fatalf("undone_by = %q, want %s", orig.UndoneBy, undo.Key)
	}
	// The undo's diff goes from the state after the write back to before.
	diff := map[string]approval.Change{}
	for _, c := range undo.Preview.Diff {
		diff[c.Field] = c
	}
	if c := diff["title"]; string(c.Before) != `"Retro"` || string(c.After) != `"Standup"` {
		t.Fatalf("undo diff title = %+v", c)
	}
	if c := diff["time.zone"]; string(c.Before) != `"CET"` || string(c.After) != `"UTC"` {
		t.Fatalf("undo diff time.zone = %+v", c)
	}
	if undo.State == nil || undo.State.Hash != res.PostStateHash && undo.State.ETag == "" {
		t.Fatalf("undo state = %+v", undo.State)
	}
	// Preparing it again returns the same draft.
	again, created, err := e.svc.PrepareUndo(bg, e.agent, op.Key)
	if err != nil || created || again.Key != undo.Key {
		t.Fatalf("second undo: %v %v %v", again, created, err)
	}
	e.approve(t, e.send(t, undo.Key))
	if u := e.run(t, undo.Key); u.Status != approval.StatusSucceeded {
		t.Fatalf("undo status %s %+v", u.Status, u.Error)
	}
	if got, want := mustJSON(t, e.target.doc(eventPath)), mustJSON(t, event()); got != want {
		t.Fatalf("after undo = %s, want %s", got, want)
	}
}

// Stale 6: the resource changed after the execution: undo is refused with
// stale_state and no undo operation is drafted.
func TestStale_UndoAfterResourceChangedSinceExecution(t *testing.T) {
	e := newSvcEnv(t, true)
	op := e.prepare(t, httpreq.Name, patchTitle)
	e.approve(t, e.send(t, op.Key))
	if done := e.run(t, op.Key); done.Status != approval.StatusSucceeded {
		t.Fatalf("status %s", done.Status)
	}
	e.target.change(eventPath, "title", "Edited by a person")
	_, _, err := e.svc.PrepareUndo(bg, e.agent, op.Key)
	if ce := codedErr(t, err); ce.Code != approval.CodeStaleState {
		t.Fatalf("code %s, want stale_state", ce.Code)
	}
	if orig, _ := e.svc.Get(bg, e.agent, op.Key); orig.UndoneBy != "" {
		t.Fatalf("undone_by = %s after a refused undo", orig.UndoneBy)
	}
	if got := e.target.doc(eventPath)["title"]; got != "Edited by a person" {
		t.Fatalf("title = %v", got)
	}
}

// Stale 7: the undo is drafted, then the resource changes before the undo
// runs: the undo is itself state-bound and fails stale_state.
func TestStale_UndoDraftedThenResourceChanged(t *testing.T) {
	e := newSvcEnv(t, true)
	op := e.prepare(t, httpreq.Name, patchTitle)
	e.approve(t, e.send(t, op.Key))
	e.run(t, op.Key)
	undo, _, err := e.svc.PrepareUndo(bg, e.agent, op.Key)
	if err != nil {
		t.Fatal(err)
	}
	link := e.send(t, undo.Key)
	e.approve(t, link)
	e.target.change(eventPath, "title", "Edited by a person")
	u := e.run(t, undo.Key)
	wantFailed(t, u, approval.CodeStaleState)
	if got := e.target.doc(eventPath)["title"]; got != "Edited by a person" {
		t.Fatalf("title = %v", got)
	}
}

func TestUndoIrreversibleRefused(t *testing.T) {
	e := newSvcEnv(t, true)
	for _, tc := range []struct{ action, input string }{
		{"email.send", `{"to":["a@client.example"]}`},
		{httpreq.Name, `{"target":"calendar","method":"DELETE","path":"/events/42"}`},
	} {
		op := e.prepare(t, tc.action, tc.input)
		e.approve(t, e.send(t, op.Key))
		if done := e.run(t, op.Key); done.Status != approval.StatusSucceeded {
			t.Fatalf("%s: status %s %+v", tc.action, done.Status, done.Error)
		}
		_, _, err := e.svc.PrepareUndo(bg, e.agent, op.Key)
		ce := codedErr(t, err)
		if ce.Code != approval.CodeInvalidState || ce.Details["reason"] != "irreversible" {
			t.Fatalf("%s: got %s %v, want invalid_state irreversible", tc.action, ce.Code, ce.Details)
		}
	}
}

// TestCredentialNeverAppears runs successes, failures, stale operations and
// undo against a target that echoes its Authorization header into every
// answer, then scans everything an agent, a log reader or an auditor could
// see, and everything stored in Redis, for the credential.
func TestCredentialNeverAppears(t *testing.T) {
	e := newSvcEnv(t, true)
	e.target.mu.Lock()
	e.target.echo = true
	e.target.mu.Unlock()
	e.target.put(eventPath, event())
	var seen []string
	record := func(v any) { seen = append(seen, mustJSON(t, v)) }
	view := func(op *approval.Operation) { record(approval.AgentView(op, e.svc.Now())) }

	// A write that succeeds, echoing the credential in its response; then
	// its undo.
	op := e.prepare(t, httpreq.Name, `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"Retro","debug_echo":"x"}}`)
	view(op)
	e.approve(t, e.send(t, op.Key))
	done := e.run(t, op.Key)
	view(done)
	if done.Status != approval.StatusSucceeded {
		t.Fatalf("status %s %+v", done.Status, done.Error)
	}
	undo, _, err := e.svc.PrepareUndo(bg, e.agent, op.Key)
	if err != nil {
		t.Fatal(err)
	}
	view(undo)

	// A write the target refuses with an error that echoes the credential.
	e.target.mu.Lock()
	e.target.override = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost {
			return false
		}
		w.WriteHeader(400)
		_, _ = w.Write([]byte(`{"error":"bad auth ` + r.Header.Get("Authorization") + `"}`))
		return true
	}
	e.target.mu.Unlock()
	post := e.prepare(t, httpreq.Name, `{"target":"calendar","method":"POST","path":"/events","body":{"title":"x"}}`)
	e.approve(t, e.send(t, post.Key))
	failed := e.run(t, post.Key)
	wantFailed(t, failed, approval.CodeExecutionFailed)
	view(failed)

	// A stale operation, whose error carries the current values.
	e.target.put(eventPath, event())
	st := e.prepare(t, httpreq.Name, `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"debug_echo":"y"}}`)
	link := e.send(t, st.Key)
	e.target.change(eventPath, "start", "12:00")
	if v, err := e.svc.OpenLink(bg, link); err == nil {
		record(v.Message)
		record(v.Stale)
	}
	staleOp, _ := e.svc.Get(bg, e.agent, st.Key)
	wantFailed(t, staleOp, approval.CodeStaleState)
	view(staleOp)

	// A re-check that fails (the target errors): logged by the service.
	e.target.put(eventPath, event())
	rc := e.prepare(t, httpreq.Name, `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"z"}}`)
	rcLink := e.send(t, rc.Key)
	e.target.mu.Lock()
	e.target.override = func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(500)
		_, _ = w.Write([]byte(r.Header.Get("Authorization")))
		return true
	}
	e.target.mu.Unlock()
	if v, err := e.svc.OpenLink(bg, rcLink); err == nil {
		record(v.Message)
	}
	// Errors returned to the agent at prepare.
	for _, in := range []string{
		`{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"q"}}`,
		`{"target":"calendar","method":"PATCH","path":"//evil/x","body":{}}`,
	} {
		_, _, err := e.svc.Prepare(bg, e.agent, approval.PrepareCall{Action: httpreq.Name, Input: json.RawMessage(in)})
		if err == nil {
			t.Fatalf("prepare %s succeeded", in)
		}
		record(err)
		record(err.Error())
	}
	// Everything else: full stored operations, audit trails, log lines,
	// and the whole Redis keyspace.
	ops, err := e.svc.List(bg, e.agent, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		record(o)
		view(o)
		evs, _ := e.svc.Events(bg, e.agent, o.Key)
		record(evs)
	}
	e.mu.Lock()
	record(e.events)
	e.mu.Unlock()
	seen = append(seen, e.logs.String(), dumpRedis(t, e.rdb))

	all := strings.Join(seen, "\n")
	if strings.Contains(all, cred) {
		i := strings.Index(all, cred)
		t.Fatalf("the credential leaked: …%s…", all[max(0, i-200):min(len(all), i+50)])
	}
	// Not vacuous: the target did get the credential, and echoed it.
	got := 0
	for _, r := range e.target.requests() {
		if r.Authorization == "Bearer "+cred {
			got++
		}
	}
	if got < 10 {
		t.Fatalf("the target saw the credential only %d times", got)
	}
	if !strings.Contains(all, "[redacted]") {
		t.Fatal("no redaction happened: the echo did not reach what was scanned")
	}
}

var unzstd, _ = zstd.NewReader(nil)

// dumpRedis renders every key and value of the test database.
func dumpRedis(t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	var b strings.Builder
	iter := rdb.Scan(bg, 0, "*", 1000).Iterator()
	for iter.Next(bg) {
		k := iter.Val()
		b.WriteString(k + "\n")
		switch typ, _ := rdb.Type(bg, k).Result(); typ {
		case "string":
			b.WriteString(rdb.Get(bg, k).Val())
		case "hash":
			h := rdb.HGetAll(bg, k).Val()
			for f, v := range h { // bulky fields are stored compressed: scan what they hold
				if strings.HasPrefix(v, "\x28\xb5\x2f\xfd") {
					out, err := unzstd.DecodeAll([]byte(v), nil)
					if err != nil {
						t.Fatalf("%s %s: %v", k, f, err)
					}
					h[f] = string(out)
				}
			}
			b.WriteString(mustJSON(t, h))
		case "list":
			b.WriteString(mustJSON(t, rdb.LRange(bg, k, 0, -1).Val()))
		case "set":
			b.WriteString(mustJSON(t, rdb.SMembers(bg, k).Val()))
		case "zset":
			b.WriteString(mustJSON(t, rdb.ZRangeWithScores(bg, k, 0, -1).Val()))
		case "stream":
			b.WriteString(mustJSON(t, rdb.XRange(bg, k, "-", "+").Val()))
		}
		b.WriteString("\n")
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
