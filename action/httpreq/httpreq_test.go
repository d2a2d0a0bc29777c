package httpreq_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
)

var bg = context.Background()

// cred is the target credential; no test output may ever contain it.
const cred = "cs-test-credential-7f3a9c1e5b"

const eventPath = "/api/events/42"

func calendarTarget(f *fakeTarget) httpreq.Target {
	return httpreq.Target{
		Name: "calendar", BaseURL: f.srv.URL + "/api",
		Headers: map[string]string{"Authorization": "Bearer " + cred},
		Allow: []httpreq.Rule{{Method: "PATCH", Path: "/events/*", Query: []string{"notify"}}, {Method: "PUT", Path: "/events/*"},
			{Method: "DELETE", Path: "/events/*"}, {Method: "POST", Path: "/events"}},
		StateFields:  []string{"start", "end", "title"},
		AllowPrivate: true,
	}
}

func newAction(t *testing.T, targets ...httpreq.Target) *httpreq.Action {
	t.Helper()
	a, err := httpreq.New(targets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

var agent = &approval.Principal{ID: "agent", Scopes: []string{"http.request:calendar"}}

func event() map[string]any {
	return map[string]any{"title": "Standup", "start": "09:00", "end": "09:15",
		"time": map[string]any{"zone": "UTC"}, "tags": []any{"team"}, "owner": "sam"}
}

func prepare(t *testing.T, a *httpreq.Action, input string) *approval.Prepared {
	t.Helper()
	p, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent, Input: json.RawMessage(input)})
	if err != nil {
		t.Fatalf("prepare %s: %v", input, err)
	}
	return p
}

// opOf builds the operation the service would store for a prepare.
func opOf(t testing.TB, p *approval.Prepared) *approval.Operation {
	t.Helper()
	in, err := approval.Canonical(p.Input)
	if err != nil {
		t.Fatal(err)
	}
	return &approval.Operation{Key: approval.NewOperationKey(), Action: httpreq.Name, Input: in, State: p.State,
		Preview: p.Preview, Status: approval.StatusExecuting}
}

func execErr(t *testing.T, err error) *approval.ExecError {
	t.Helper()
	var ee *approval.ExecError
	if !errors.As(err, &ee) {
		t.Fatalf("error %v (%T), want *ExecError", err, err)
	}
	return ee
}

func codedErr(t *testing.T, err error) *approval.Error {
	t.Helper()
	var e *approval.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *approval.Error", err, err)
	}
	return e
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func TestPrepareDiffNestedAndAbsentFields(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	p := prepare(t, a, `{"target":"calendar","method":"patch","path":"/events/42","body":{
		"title":"Standup (moved)","time":{"zone":"CET","end":"10:00"},"location":"Room 1","tags":["team","ops"],"note":null}}`)

	want := []approval.Change{
		{Field: "location", Before: nil, After: raw(`"Room 1"`)},
		{Field: "note", Before: nil, After: raw(`null`)},
		{Field: "tags", Before: raw(`["team"]`), After: raw(`["team","ops"]`)},
		{Field: "time.end", Before: nil, After: raw(`"10:00"`)},
		{Field: "time.zone", Before: raw(`"UTC"`), After: raw(`"CET"`)},
		{Field: "title", Before: raw(`"Standup"`), After: raw(`"Standup (moved)"`)},
	}
	if got := p.Preview.Diff; !reflect.DeepEqual(got, want) {
		t.Fatalf("diff =\n%s\nwant\n%s", mustJSON(t, got), mustJSON(t, want))
	}
	// The binding covers the configured fields and every field the body sets.
	var snap struct {
		Fields []string                   `json:"fields"`
		Values map[string]json.RawMessage `json:"values"`
	}
	if err := json.Unmarshal(p.State.Snapshot, &snap); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(snap.Fields, ","), "end,location,note,start,tags,time.end,time.zone,title"; got != want {
		t.Fatalf("bound fields = %s, want %s", got, want)
	}
	if _, ok := snap.Values["location"]; ok {
		t.Fatal("an absent field must be absent from the snapshot, not null")
	}
	if h, _ := approval.StateHash(json.RawMessage(p.State.Snapshot)); h != p.State.Hash {
		t.Fatalf("state hash %s is not the hash of the snapshot (%s)", p.State.Hash, h)
	}
	if got, want := p.State.ETag, `"v1"`; got != want {
		t.Fatalf("etag = %s, want %s", got, want)
	}
	if got, want := p.Scope, "http.request:calendar"; got != want {
		t.Fatalf("scope = %s, want %s", got, want)
	}
	if got := p.Attrs; got["target"] != "calendar" || got["method"] != "PATCH" || got["body.time.zone"] != "CET" || got["body.note"] != "null" {
		t.Fatalf("attrs = %v", got)
	}
	if len(f.writes()) != 0 {
		t.Fatal("prepare wrote to the target")
	}
}

func TestPrepareDiffPutShowsDroppedFieldsAndDeleteShowsRemoval(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	p := prepare(t, a, `{"target":"calendar","method":"PUT","path":"/events/42","body":{"title":"New","start":"09:00","end":"09:15"}}`)
	got := map[string]approval.Change{}
	for _, c := range p.Preview.Diff {
		got[c.Field] = c
	}
	for _, dropped := range []string{"owner", "tags", "time.zone"} {
		if c, ok := got[dropped]; !ok || c.Before == nil || c.After != nil {
			t.Fatalf("PUT diff for dropped %s = %+v, want before set and after absent", dropped, c)
		}
	}
	if c := got["title"]; string(c.Before) != `"Standup"` || string(c.After) != `"New"` {
		t.Fatalf("title change = %+v", c)
	}

	d := prepare(t, a, `{"target":"calendar","method":"DELETE","path":"/events/42"}`)
	if len(d.Preview.Diff) != 3 {
		t.Fatalf("delete diff = %s, want the 3 configured fields", mustJSON(t, d.Preview.Diff))
	}
	for _, c := range d.Preview.Diff {
		if c.Before == nil || c.After != nil {
			t.Fatalf("delete diff row %+v, want before set and after absent", c)
		}
	}
	if !contains(strings.Join(d.Preview.Warnings, ","), "irreversible") {
		t.Fatalf("delete warnings = %v, want irreversible", d.Preview.Warnings)
	}
}

func TestPrepareRefusesMissingOrUnreadableResource(t *testing.T) {
	f := newFakeTarget(t, true)
	a := newAction(t, calendarTarget(f))
	for _, tc := range []struct {
		name     string
		status   int
		code     approval.Code
		rule     string
		noDoc    bool
		override bool
	}{
		{name: "gone", noDoc: true, code: approval.CodeInvalidInput, rule: "resource_not_found"},
		{name: "forbidden", status: 403, override: true, code: approval.CodeInvalidInput, rule: "state_read_failed"},
		{name: "server error", status: 503, override: true, code: approval.CodeUnavailable, rule: "state_read_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.mu.Lock()
			f.docs = map[string]map[string]any{}
			f.override = nil
			if tc.override {
				f.override = func(w http.ResponseWriter, r *http.Request) bool { w.WriteHeader(tc.status); return true }
			}
			f.mu.Unlock()
			if !tc.noDoc {
				f.put(eventPath, event())
			}
			_, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent,
				Input: json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"x"}}`)})
			e := codedErr(t, err)
			if e.Code != tc.code || e.Details["rule"] != tc.rule {
				t.Fatalf("got %s rule %v (%s), want %s rule %s", e.Code, e.Details["rule"], e.Message, tc.code, tc.rule)
			}
		})
	}
}

// TestSSRFShapesRefused: every path, method or target shape that could
// reach anything but the allowed resources of the target's base URL is
// refused before a single request is sent.
func TestSSRFShapesRefused(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	big := `"` + strings.Repeat("x", httpreq.DefaultMaxBodyBytes) + `"`
	for _, tc := range []struct {
		name, input string
		code        approval.Code
		rule        string
	}{
		{"network-path //host", `{"target":"calendar","method":"PATCH","path":"//evil.example/events/42","body":{}}`, approval.CodeInvalidInput, "absolute_url"},
		{"absolute https URL", `{"target":"calendar","method":"PATCH","path":"https://evil.example/events/42","body":{}}`, approval.CodeInvalidInput, "absolute_url"},
		{"absolute URL after slash", `{"target":"calendar","method":"PATCH","path":"/http://evil.example/x","body":{}}`, approval.CodeInvalidInput, "absolute_url"},
		{"scheme without slashes", `{"target":"calendar","method":"PATCH","path":"http:evil.example","body":{}}`, approval.CodeInvalidInput, "absolute_url"},
		{"host without scheme", `{"target":"calendar","method":"PATCH","path":"evil.example/events/42","body":{}}`, approval.CodeInvalidInput, "relative_path"},
		{"dot-dot", `{"target":"calendar","method":"PATCH","path":"/events/../admin","body":{}}`, approval.CodeInvalidInput, "path_traversal"},
		{"dot", `{"target":"calendar","method":"PATCH","path":"/events/./42","body":{}}`, approval.CodeInvalidInput, "path_traversal"},
		{"encoded dot-dot", `{"target":"calendar","method":"PATCH","path":"/events/%2e%2e/admin","body":{}}`, approval.CodeInvalidInput, "path_traversal"},
		{"encoded dot-dot upper", `{"target":"calendar","method":"PATCH","path":"/events/%2E%2E","body":{}}`, approval.CodeInvalidInput, "path_traversal"},
		{"half-encoded dot-dot", `{"target":"calendar","method":"PATCH","path":"/events/.%2e/admin","body":{}}`, approval.CodeInvalidInput, "path_traversal"},
		{"dot-dot-semicolon", `{"target":"calendar","method":"PATCH","path":"/events/..;/admin","body":{}}`, approval.CodeInvalidInput, "path_traversal"},
		{"encoded slash", `{"target":"calendar","method":"PATCH","path":"/events/42%2fadmin","body":{}}`, approval.CodeInvalidInput, "encoded_separator"},
		{"encoded slash upper", `{"target":"calendar","method":"PATCH","path":"/events/42%2F..%2Fadmin","body":{}}`, approval.CodeInvalidInput, "encoded_separator"},
		{"encoded backslash", `{"target":"calendar","method":"PATCH","path":"/events/42%5cadmin","body":{}}`, approval.CodeInvalidInput, "encoded_separator"},
		{"backslash", `{"target":"calendar","method":"PATCH","path":"/events\\42","body":{}}`, approval.CodeInvalidInput, "backslash"},
		{"backslash host", `{"target":"calendar","method":"PATCH","path":"/\\evil.example","body":{}}`, approval.CodeInvalidInput, "backslash"},
		{"double encoding", `{"target":"calendar","method":"PATCH","path":"/events/%252e%252e/admin","body":{}}`, approval.CodeInvalidInput, "double_encoding"},
		{"empty segment", `{"target":"calendar","method":"PATCH","path":"/events//42","body":{}}`, approval.CodeInvalidInput, "empty_segment"},
		{"NUL", `{"target":"calendar","method":"PATCH","path":"/events/42\u0000","body":{}}`, approval.CodeInvalidInput, "control_character"},
		{"newline", `{"target":"calendar","method":"PATCH","path":"/events/42\nHost: evil","body":{}}`, approval.CodeInvalidInput, "control_character"},
		{"encoded newline", `{"target":"calendar","method":"PATCH","path":"/events/42%0d%0aX:1","body":{}}`, approval.CodeInvalidInput, "control_character"},
		{"userinfo", `{"target":"calendar","method":"PATCH","path":"/events/42@evil.example","body":{}}`, approval.CodeInvalidInput, "userinfo"},
		{"encoded userinfo", `{"target":"calendar","method":"PATCH","path":"/events/42%40evil.example","body":{}}`, approval.CodeInvalidInput, "userinfo"},
		{"query in path", `{"target":"calendar","method":"PATCH","path":"/events/42?admin=1","body":{}}`, approval.CodeInvalidInput, "query_in_path"},
		{"fragment", `{"target":"calendar","method":"PATCH","path":"/events/42#x","body":{}}`, approval.CodeInvalidInput, "query_in_path"},
		{"encoded query", `{"target":"calendar","method":"PATCH","path":"/events/42%3F_method=DELETE","body":{}}`, approval.CodeInvalidInput, "query_in_path"},
		{"encoded fragment", `{"target":"calendar","method":"PATCH","path":"/events/42%23x","body":{}}`, approval.CodeInvalidInput, "query_in_path"},
		{"bad escape", `{"target":"calendar","method":"PATCH","path":"/events/%zz","body":{}}`, approval.CodeInvalidInput, "invalid_escape"},
		{"space", `{"target":"calendar","method":"PATCH","path":"/events/4 2","body":{}}`, approval.CodeInvalidInput, "invalid_character"},
		{"GET is not a write", `{"target":"calendar","method":"GET","path":"/events/42"}`, approval.CodePolicyDenied, "method_not_allowed"},
		{"TRACE", `{"target":"calendar","method":"TRACE","path":"/events/42"}`, approval.CodePolicyDenied, "method_not_allowed"},
		{"CONNECT", `{"target":"calendar","method":"CONNECT","path":"/events/42"}`, approval.CodePolicyDenied, "method_not_allowed"},
		{"POST not on this path", `{"target":"calendar","method":"POST","path":"/events/42"}`, approval.CodePolicyDenied, "path_not_allowed"},
		{"path outside allow-list", `{"target":"calendar","method":"DELETE","path":"/calendars/1"}`, approval.CodePolicyDenied, "path_not_allowed"},
		{"deeper than *", `{"target":"calendar","method":"PATCH","path":"/events/42/attendees","body":{}}`, approval.CodePolicyDenied, "path_not_allowed"},
		{"unknown target", `{"target":"billing","method":"PATCH","path":"/events/42","body":{}}`, approval.CodePolicyDenied, "target_not_allowed"},
		{"body too large", `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"x":` + big + `}}`, approval.CodePolicyDenied, "max_body_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.requests())
			_, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent, Input: json.RawMessage(tc.input)})
			e := codedErr(t, err)
			if e.Code != tc.code || e.Details["rule"] != tc.rule {
				t.Fatalf("got %s rule %v (%s), want %s rule %s", e.Code, e.Details["rule"], e.Message, tc.code, tc.rule)
			}
			if e.Code == approval.CodeInvalidInput && e.Details["fields"] == nil {
				t.Fatalf("invalid_input without details.fields: %+v", e.Details)
			}
			if n := len(f.requests()); n != before {
				t.Fatalf("a refused request reached the target (%d requests)", n-before)
			}
		})
	}
	// Input the agent may not set at all.
	for _, in := range []string{
		`{"target":"calendar","method":"PATCH","path":"/events/42","headers":{"Authorization":"x"},"body":{}}`,
		`{"target":"calendar","method":"PATCH","url":"https://evil.example/","path":"/events/42","body":{}}`,
		`{"target":"calendar","method":"PA TCH","path":"/events/42","body":{}}`,
		`{"target":"calendar","method":"PATCH","path":"/events/42","body":[1,2]}`,
		`{"target":"calendar","method":"PATCH","path":"/events/42","body":{"a.b":1}}`,
	} {
		_, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent, Input: json.RawMessage(in)})
		if e := codedErr(t, err); e.Code != approval.CodeInvalidInput {
			t.Fatalf("%s: got %s, want invalid_input", in, e.Code)
		}
	}
}

// A principal without the target's scope causes no request at all, not
// even the state read with the target's credentials.
func TestPrepareChecksScopeBeforeReading(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	other := &approval.Principal{ID: "other", Scopes: []string{"http.request:billing"}}
	_, err := a.Prepare(bg, approval.PrepareRequest{Principal: other,
		Input: json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"x"}}`)})
	if e := codedErr(t, err); e.Code != approval.CodeInsufficientScope {
		t.Fatalf("code = %s, want insufficient_scope", e.Code)
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests reached the target", n)
	}
}

func TestSSRFRedirectsNeverFollowed(t *testing.T) {
	elsewhere := newFakeTarget(t, false)
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	redirect := func(status int, method string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != method {
				return false
			}
			http.Redirect(w, r, elsewhere.srv.URL+"/steal", status)
			return true
		}
	}

	// At prepare, the state read is redirected.
	f.mu.Lock()
	f.override = redirect(http.StatusFound, http.MethodGet)
	f.mu.Unlock()
	_, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent,
		Input: json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"x"}}`)})
	if e := codedErr(t, err); e.Code != approval.CodePolicyDenied || e.Details["rule"] != "redirect" {
		t.Fatalf("got %s %v, want policy_denied rule redirect", e.Code, e.Details)
	}

	// At execution, the write is redirected.
	f.mu.Lock()
	f.override = redirect(http.StatusTemporaryRedirect, http.MethodPatch)
	f.mu.Unlock()
	p := prepare(t, a, `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"x"}}`)
	_, err = a.Execute(bg, opOf(t, p))
	ee := execErr(t, err)
	if ee.Code != approval.CodeExecutionFailed || ee.OutcomeUnknown || ee.Details["rule"] != "redirect" {
		t.Fatalf("got %+v, want execution_failed, outcome known, rule redirect", ee)
	}
	if n := len(elsewhere.requests()); n != 0 {
		t.Fatalf("the other host received %d requests", n)
	}
}

func TestSSRFPrivateAddressesRefusedAtDial(t *testing.T) {
	f := newFakeTarget(t, true) // listens on 127.0.0.1
	f.put(eventPath, event())
	tg := calendarTarget(f)
	tg.AllowPrivate = false
	// A host name that resolves to loopback is refused the same way: the
	// check runs on the address actually dialed.
	_, port, _ := net.SplitHostPort(f.srv.Listener.Addr().String())
	named := tg
	named.Name = "named"
	named.BaseURL = "http://localhost:" + port + "/api"
	a := newAction(t, tg, named)
	all := &approval.Principal{ID: "agent", Scopes: []string{"http.request"}}
	for _, target := range []string{"calendar", "named"} {
		_, err := a.Prepare(bg, approval.PrepareRequest{Principal: all,
			Input: json.RawMessage(`{"target":"` + target + `","method":"PATCH","path":"/events/42","body":{"title":"x"}}`)})
		if e := codedErr(t, err); e.Code != approval.CodePolicyDenied || e.Details["rule"] != "private_address" {
			t.Fatalf("%s: got %s %v (%s), want policy_denied rule private_address", target, e.Code, e.Details, e.Message)
		}
	}
	// A POST is not state-bound: the refusal comes at execution.
	p, err := a.Prepare(bg, approval.PrepareRequest{Principal: all,
		Input: json.RawMessage(`{"target":"calendar","method":"POST","path":"/events","body":{"title":"x"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Execute(bg, opOf(t, p))
	if ee := execErr(t, err); ee.Code != approval.CodeExecutionFailed || ee.OutcomeUnknown || ee.Details["rule"] != "private_address" {
		t.Fatalf("got %+v, want execution_failed, outcome known, rule private_address", ee)
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests reached a private address", n)
	}
}

func TestExecuteSendsIfMatchAndIdempotencyKeyAndRecordsResult(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	p := prepare(t, a, `{"target":"calendar","method":"PATCH","path":"/events/42","query":{"notify":"none"},"body":{"title":"Retro"}}`)
	op := opOf(t, p)
	res, err := a.Execute(bg, op)
	if err != nil {
		t.Fatal(err)
	}
	w := f.writes()
	if len(w) != 1 {
		t.Fatalf("%d writes, want 1", len(w))
	}
	if got, want := w[0].IfMatch, p.State.ETag; got != want || got == "" {
		t.Fatalf("If-Match = %q, want %q", got, want)
	}
	if got, want := w[0].IdempotencyKey, op.Key; got != want {
		t.Fatalf("Idempotency-Key = %q, want %q", got, want)
	}
	if got, want := w[0].Authorization, "Bearer "+cred; got != want {
		t.Fatal("the target did not receive its configured credential")
	}
	if got, want := w[0].Query, "notify=none"; got != want {
		t.Fatalf("query = %q, want %q", got, want)
	}
	if got, want := w[0].Body, `{"title":"Retro"}`; got != want {
		t.Fatalf("body = %s, want the stored canonical body %s", got, want)
	}
	var r httpreq.Result
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != 200 || !contains(r.Body, `"Retro"`) || r.PostStateHash == "" || r.PostStateHash == p.State.Hash {
		t.Fatalf("result = %+v", r)
	}
	if h, _ := approval.StateHash(r.PostState); h != r.PostStateHash {
		t.Fatal("post_state_hash is not the hash of post_state")
	}
}

func TestExecuteTruncatesLongResponseBody(t *testing.T) {
	f := newFakeTarget(t, false)
	a := newAction(t, calendarTarget(f))
	f.mu.Lock()
	f.override = func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(201)
		_, _ = w.Write([]byte(strings.Repeat("é", 5000)))
		return true
	}
	f.mu.Unlock()
	p := prepare(t, a, `{"target":"calendar","method":"POST","path":"/events","body":{"title":"x"}}`)
	res, err := a.Execute(bg, opOf(t, p))
	if err != nil {
		t.Fatal(err)
	}
	var r httpreq.Result
	_ = json.Unmarshal(res, &r)
	if len(r.Body) > httpreq.ResultBodyBytes || !r.BodyTruncated || !strings.HasPrefix(r.Body, "éé") || strings.ContainsRune(r.Body, '\uFFFD') {
		t.Fatalf("body of %d bytes, truncated %v", len(r.Body), r.BodyTruncated)
	}
}

func TestExecuteOutcomes(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	for _, tc := range []struct {
		name    string
		status  int
		hangup  bool
		refused bool
		code    approval.Code
		unknown bool
	}{
		{name: "412", status: 412, code: approval.CodePreconditionFailed},
		{name: "400 answered", status: 400, code: approval.CodeExecutionFailed},
		{name: "500 answered", status: 500, code: approval.CodeExecutionFailed},
		{name: "504 from a gateway", status: 504, code: approval.CodeExecutionFailed, unknown: true},
		{name: "connection refused before sending", refused: true, code: approval.CodeExecutionFailed},
		{name: "connection dropped after sending", hangup: true, code: approval.CodeExecutionFailed, unknown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTarget(t, false)
			tg := calendarTarget(f)
			if tc.refused {
				tg.BaseURL = closedURL + "/api"
			}
			a := newAction(t, tg)
			f.mu.Lock()
			f.override = func(w http.ResponseWriter, r *http.Request) bool {
				if tc.hangup {
					conn, _, _ := w.(http.Hijacker).Hijack()
					conn.Close()
					return true
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"error":"no"}`))
				return true
			}
			f.mu.Unlock()
			p := prepare(t, a, `{"target":"calendar","method":"POST","path":"/events","body":{"title":"x"}}`)
			_, err := a.Execute(bg, opOf(t, p))
			ee := execErr(t, err)
			if ee.Code != tc.code || ee.OutcomeUnknown != tc.unknown {
				t.Fatalf("got %s unknown=%v (%s), want %s unknown=%v", ee.Code, ee.OutcomeUnknown, ee.Message, tc.code, tc.unknown)
			}
			if tc.hangup {
				if n := len(f.writes()); n != 1 {
					t.Fatalf("the write was sent %d times, want exactly once (no transport retry)", n)
				}
			}
		})
	}
}

func TestRecheckReportsStaleWithCurrentValues(t *testing.T) {
	f := newFakeTarget(t, false)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	p := prepare(t, a, `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"Retro"}}`)
	op := opOf(t, p)
	if err := a.Recheck(bg, op); err != nil {
		t.Fatalf("recheck of an unchanged resource: %v", err)
	}
	f.change(eventPath, "start", "11:00")
	ee := execErr(t, a.Recheck(bg, op))
	if ee.Code != approval.CodeStaleState {
		t.Fatalf("code = %s", ee.Code)
	}
	cur := ee.Details["current"].(map[string]json.RawMessage)
	if got, want := string(cur["start"]), `"11:00"`; got != want {
		t.Fatalf("current start = %s, want %s", got, want)
	}
	changed := ee.Details["changed"].([]approval.Change)
	if len(changed) != 1 || changed[0].Field != "start" || string(changed[0].Before) != `"09:00"` || string(changed[0].After) != `"11:00"` {
		t.Fatalf("changed = %s", mustJSON(t, changed))
	}
	if !contains(ee.Message, "start") {
		t.Fatalf("message %q does not name the field", ee.Message)
	}
}

// A change to a field outside the binding still changes the ETag; the
// write would get 412, so the re-check says stale at once.
func TestRecheckStaleOnETagChangeAlone(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	p := prepare(t, a, `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"Retro"}}`)
	f.change(eventPath, "owner", "grace")
	ee := execErr(t, a.Recheck(bg, opOf(t, p)))
	if ee.Code != approval.CodeStaleState || ee.Details["reason"] != "etag_changed" {
		t.Fatalf("got %s %v", ee.Code, ee.Details)
	}
}

func TestUndoInputRestoresTouchedFields(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	p := prepare(t, a, `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"Retro","time":{"zone":"CET"},"location":"Room 1"}}`)
	op := opOf(t, p)
	res, err := a.Execute(bg, op)
	if err != nil {
		t.Fatal(err)
	}
	op.Result, op.Status = res, approval.StatusSucceeded
	action, in, err := a.UndoInput(bg, op)
	if err != nil {
		t.Fatal(err)
	}
	if action != httpreq.Name {
		t.Fatalf("action = %s", action)
	}
	var got map[string]any
	_ = json.Unmarshal(in, &got)
	want := map[string]any{"target": "calendar", "method": "PATCH", "path": "/events/42",
		"body": map[string]any{"title": "Standup", "time": map[string]any{"zone": "UTC"}, "location": nil}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("undo input = %s\nwant %s", in, mustJSON(t, want))
	}
	// Once the resource changes after the execution, undo is refused.
	f.change(eventPath, "title", "Someone else's title")
	_, _, err = a.UndoInput(bg, op)
	e := codedErr(t, err)
	if e.Code != approval.CodeStaleState {
		t.Fatalf("code = %s, want stale_state", e.Code)
	}
	if cur := e.Details["current"].(map[string]json.RawMessage); string(cur["title"]) != `"Someone else's title"` {
		t.Fatalf("current = %v", cur)
	}
}

func TestUndoInputPutAndIrreversible(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	p := prepare(t, a, `{"target":"calendar","method":"PUT","path":"/events/42","body":{"title":"New","start":"10:00"}}`)
	op := opOf(t, p)
	res, err := a.Execute(bg, op)
	if err != nil {
		t.Fatal(err)
	}
	op.Result = res
	_, in, err := a.UndoInput(bg, op)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Method string         `json:"method"`
		Body   map[string]any `json:"body"`
	}
	_ = json.Unmarshal(in, &got)
	if got.Method != "PUT" || !reflect.DeepEqual(got.Body, event()) {
		t.Fatalf("PUT undo = %s, want the previous resource %s", in, mustJSON(t, event()))
	}

	for _, input := range []string{
		`{"target":"calendar","method":"DELETE","path":"/events/42"}`,
		`{"target":"calendar","method":"POST","path":"/events","body":{"title":"x"}}`,
	} {
		f.put(eventPath, event())
		p := prepare(t, a, input)
		op := opOf(t, p)
		if op.Result, err = a.Execute(bg, op); err != nil {
			t.Fatal(err)
		}
		_, _, err := a.UndoInput(bg, op)
		e := codedErr(t, err)
		if e.Code != approval.CodeInvalidState || e.Details["reason"] != "irreversible" {
			t.Fatalf("%s: got %s %v, want invalid_state irreversible", input, e.Code, e.Details)
		}
	}
}

func TestSampleAttrs(t *testing.T) {
	got, err := httpreq.SampleAttrs(json.RawMessage(`{"target":"billing","method":"post","path":"/invoices",
		"query":{"dry_run":false,"tag":["a","b"]},"body":{"amount":1500.50,"currency":"EUR","customer":{"tier":"gold","vip":true},"lines":[1,2],"memo":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"target": "billing", "method": "POST", "path": "/invoices", "query.dry_run": "false",
		"query.tag": approval.AttrOpaque("list"), "body": approval.AttrObject, "body.amount": "1500.5", "body.currency": "EUR",
		"body.customer": approval.AttrObject, "body.customer.tier": "gold", "body.customer.vip": "true",
		"body.lines": approval.AttrOpaque("list"), "body.memo": "null"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("attrs = %v\nwant %v", got, want)
	}
}
