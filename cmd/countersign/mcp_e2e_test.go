package main

// End-to-end tests of MCP: the whole service as `countersign serve` builds
// it, reached by the official Go SDK client over streamable HTTP at /mcp
// (two replicas on one Redis, calls alternating between them) and over
// stdio through the built `countersign mcp` binary bridging to it. The test
// plays the human: it reads the approval link the console channel prints
// on the service's stderr and decides on the approval page.
//
// Every byte of every MCP response, and every log line (the console
// channel's deliberate notice aside), is scanned for the link and its
// parts.
//
// Measurements (not assertions): COUNTERSIGN_MCP_MEASURE=1 go test
// -run TestMCPMeasure -v ./cmd/countersign

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/testkit"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpTap sends the bearer key and copies every response (headers and
// body) into wire.
type mcpTap struct {
	key  string
	wire *syncBuffer
}

func (tp *mcpTap) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if tp.key != "" {
		r.Header.Set("Authorization", "Bearer "+tp.key)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	for k, vs := range resp.Header {
		fmt.Fprintf(tp.wire, "%s: %s\n", k, strings.Join(vs, ","))
	}
	tp.wire.Write(body)
	tp.wire.Write([]byte("\n"))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, err
}

// mcpHTTP connects the Go SDK client to a service's /mcp with key.
func mcpHTTP(t testing.TB, s *testService, key string, wire *syncBuffer) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: s.URL() + "/mcp", HTTPClient: &http.Client{Transport: &mcpTap{key: key, wire: wire}}}, nil)
	if err != nil {
		t.Fatalf("connect %s/mcp: %v", s.URL(), err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// mcpOut is a tool call's outcome.
type mcpOut struct {
	text string
	op   approval.View
	list mcpserver.ListResult
	err  *approval.Error
}

func mcpCall(t testing.TB, cs *mcp.ClientSession, tool string, args any) mcpOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	var out mcpOut
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.text += tc.Text + "\n"
		}
	}
	data, _ := json.Marshal(res.StructuredContent)
	switch {
	case res.IsError:
		var ec mcpserver.ErrorContent
		if err := json.Unmarshal(data, &ec); err != nil || ec.Error == nil {
			t.Fatalf("%s: tool error without the contract's error: %s %q", tool, data, out.text)
		}
		out.err = ec.Error
		if !strings.Contains(out.text, string(out.err.Code)) {
			t.Errorf("%s: error text lacks the code: %q", tool, out.text)
		}
	case tool == mcpserver.ToolListOperations:
		must(t, json.Unmarshal(data, &out.list))
	default:
		must(t, json.Unmarshal(data, &out.op))
	}
	return out
}

func mcpOK(t testing.TB, cs *mcp.ClientSession, tool string, args any) mcpOut {
	t.Helper()
	o := mcpCall(t, cs, tool, args)
	if o.err != nil {
		t.Fatalf("%s: %s: %s", tool, o.err.Code, o.err.Message)
	}
	return o
}

func mcpFails(t testing.TB, cs *mcp.ClientSession, tool string, args any, code approval.Code) mcpOut {
	t.Helper()
	o := mcpCall(t, cs, tool, args)
	if o.err == nil || o.err.Code != code {
		t.Fatalf("%s(%v) = %+v %q, want %s", tool, args, o.err, o.text, code)
	}
	return o
}

// mcpWaitStatus follows key with get_operation_status until want.
func mcpWaitStatus(t testing.TB, cs *mcp.ClientSession, key string, want approval.Status) approval.View {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		o := mcpOK(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 5})
		if o.op.Status == want {
			return o.op
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, want %s", key, o.op.Status, want)
		}
	}
}

// mcpWaitNotified waits until the operation records a delivered
// notification, so that a long-poll started afterwards wakes on the
// decision and not on the delivery.
func mcpWaitNotified(t testing.TB, cs *mcp.ClientSession, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o := mcpOK(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key})
		if len(o.op.Approval.Notified) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no notification recorded", key)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// linkOn waits for the approval link of key for approver on any of the
// replicas' consoles.
func linkOn(t testing.TB, key, approver string, srvs ...*testService) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range srvs {
			for _, m := range consoleLinkRE.FindAllStringSubmatch(s.Stderr.String(), -1) {
				if m[1] == approver && m[2] == key {
					return m[3]
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no console link for %s on %s", approver, key)
	return ""
}

// decideTimed opens the approval page, then times the POST that decides.
func decideTimed(t testing.TB, b *browser, link string, approve bool) (start, end time.Time) {
	t.Helper()
	st, page, _ := b.do(t, "GET", link, nil)
	if st != 200 {
		t.Fatalf("open %s: %d\n%s", link, st, page)
	}
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form on the page:\n%s", page)
	}
	decision := "approve"
	if !approve {
		decision = "reject"
	}
	start = time.Now()
	st, page, _ = b.do(t, "POST", link, url.Values{"_csrf": {m[1]}, "decision": {decision}, "reason": {""}})
	end = time.Now()
	if st != 200 {
		t.Fatalf("decide: %d\n%s", st, page)
	}
	return start, end
}

var (
	linkSecrets  = testkit.LinkSecrets
	scanForLinks = testkit.AssertNoLinkSecrets
)

func requireAction(t testing.TB, s *testService, action string) {
	t.Helper()
	if !slices.Contains(s.Service.ActionNames(), action) {
		t.Skipf("%s is not wired into countersign serve yet (actions: %v)", action, s.Service.ActionNames())
	}
}

func emailTo(to string, extra map[string]any) map[string]any {
	a := map[string]any{"to": []string{to}, "subject": "Your invoice INV-42", "text": "Hello,\n\nyour invoice is attached.\n"}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

// TestMCPTwoReplicas is the full loop through MCP over streamable HTTP,
// alternating calls between two replicas on one Redis: prepare → send
// (twice, through both replicas) → the human approves through the link →
// the long-poll wakes on the decision → succeeded, executed and notified
// once. The email variant is the loop of issue 3 (prepare_email, in
// development mode); the http.request variant runs from a policy file.
func TestMCPTwoReplicas(t *testing.T) {
	t.Run("email", func(t *testing.T) {
		a := startService(t, serviceOpts{})
		requireAction(t, a, "email.send")
		b := startService(t, serviceOpts{RedisURL: a.RedisURL})
		twoReplicaLoop(t, a, b, "you", mcpserver.ToolPrepareEmail, func(round int) map[string]any {
			return emailTo("client@example.com", map[string]any{"cc": []string{"Boss <boss@example.com>"},
				"subject": fmt.Sprintf("Your invoice INV-%d", round)})
		})
		// Each email reached the development mailbox of the replica that
		// sent it, once.
		_, inA := a.call(t, "GET", "/dev/mail", "", "")
		_, inB := b.call(t, "GET", "/dev/mail", "", "")
		for round := 0; round < 2; round++ {
			subject := fmt.Sprintf("Your invoice INV-%d<", round)
			if n := strings.Count(string(inA)+string(inB), subject); n != 1 {
				t.Errorf("%q is in the development mailboxes %d times, want once", subject, n)
			}
		}
	})
	t.Run("http.request", func(t *testing.T) {
		target := &mcpTarget{doc: map[string]any{"title": "Standup", "start": "09:00"}}
		ts := httptest.NewServer(target)
		defer ts.Close()
		a := startService(t, serviceOpts{Config: mcpConfig(ts.URL)})
		requireAction(t, a, "http.request")
		b := startService(t, serviceOpts{Config: mcpConfig(ts.URL), RedisURL: a.RedisURL})
		twoReplicaLoop(t, a, b, "grace", mcpserver.ToolPrepareHTTPRequest, func(round int) map[string]any {
			return map[string]any{"target": "calendar", "method": "PATCH", "path": "/events/42",
				"body": map[string]any{"title": fmt.Sprintf("Retro %d", round)}}
		})
		target.mu.Lock()
		defer target.mu.Unlock()
		if target.writes != 2 {
			t.Errorf("%d writes for two approved operations", target.writes)
		}
	})
}

func twoReplicaLoop(t *testing.T, a, b *testService, approver, tool string, args func(round int) map[string]any) {
	wire := &syncBuffer{}
	csA, csB := mcpHTTP(t, a, a.APIKey, wire), mcpHTTP(t, b, b.APIKey, wire)
	replicas := []*mcp.ClientSession{csA, csB}
	n := 0
	next := func() *mcp.ClientSession { n++; return replicas[n%2] }

	for i, cs := range replicas {
		lt, err := cs.ListTools(context.Background(), nil)
		must(t, err)
		var names []string
		for _, tool := range lt.Tools {
			names = append(names, tool.Name)
		}
		sort.Strings(names)
		if want := toolsThatCanRun(a.Service.ActionNames()); !slices.Equal(names, want) {
			t.Fatalf("replica %d tools = %v, want %v", i, names, want)
		}
	}

	var secrets []string
	for round := 0; round < 2; round++ {
		p := mcpOK(t, next(), tool, args(round))
		key := p.op.OperationKey
		if p.op.Status != approval.StatusDraft || !strings.Contains(p.text, "Not sent") {
			t.Fatalf("prepare: %s %q", p.op.Status, p.text)
		}
		s1 := mcpOK(t, next(), mcpserver.ToolSendOperation, map[string]any{"operation_key": key})
		s2 := mcpOK(t, next(), mcpserver.ToolSendOperation, map[string]any{"operation_key": key})
		if s1.op.Status != approval.StatusPending || s2.op.Status != approval.StatusPending {
			t.Fatalf("send twice: %s %s", s1.op.Status, s2.op.Status)
		}
		if !strings.Contains(s1.text, "will not receive a token") {
			t.Errorf("send text: %q", s1.text)
		}
		link := linkOn(t, key, approver, a, b)
		secrets = append(secrets, linkSecrets(link)...)
		mcpWaitNotified(t, next(), key)

		type polled struct {
			o  mcpOut
			at time.Time
		}
		done := make(chan polled, 1)
		poller := next()
		go func() {
			o := mcpCall(t, poller, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 30})
			done <- polled{o, time.Now()}
		}()
		time.Sleep(300 * time.Millisecond)
		start, end := decideTimed(t, newBrowser(), link, true)
		var got polled
		select {
		case got = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the long-poll did not wake on the decision")
		}
		t.Logf("round %d: long-poll returned %s after the deciding POST started (%s after its response)",
			round, got.at.Sub(start).Round(time.Millisecond), got.at.Sub(end).Round(time.Millisecond))
		if got.at.Sub(end) > time.Second {
			t.Errorf("the long-poll returned %s after the decision; want about 100 ms", got.at.Sub(end))
		}
		if got.o.err != nil || got.o.op.Status == approval.StatusPending {
			t.Fatalf("long-poll after the decision: %+v %s", got.o.err, got.o.op.Status)
		}
		final := mcpWaitStatus(t, next(), key, approval.StatusSucceeded)
		if string(final.Result) == "null" || len(final.Approval.Approvals) != 1 {
			t.Errorf("final = %s %+v", final.Result, final.Approval)
		}
		// One notification although sent twice, through two replicas.
		if c := strings.Count(a.Stderr.String()+b.Stderr.String(), "operation:   "+key); c != 1 {
			t.Errorf("%d console notices for %s, want 1", c, key)
		}
	}
	scanForLinks(t, secrets, map[string]string{
		"wire": wire.String(), "log of replica A": a.Stderr.String(), "log of replica B": b.Stderr.String(),
	})
}

// TestMCPErrorsEndToEnd: missing or unknown bearer → 401; bad arguments →
// tool errors with codes and nothing stored; unknown keys → not_found;
// idempotency_key; a principal without the scope → insufficient_scope.
func TestMCPErrorsEndToEnd(t *testing.T) {
	srv := startService(t, serviceOpts{})
	wire := &syncBuffer{}

	// 401 before any MCP processing.
	for _, c := range []struct{ name, auth string }{{"missing", ""}, {"unknown", "Bearer cs_unknown"}, {"scheme", "Token " + srv.APIKey}} {
		req, _ := http.NewRequest("POST", srv.URL()+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wire.Write(body)
		if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") ||
			!strings.Contains(string(body), `"unauthenticated"`) {
			t.Errorf("%s key: %d %q %s", c.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "x", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL() + "/mcp", HTTPClient: &http.Client{Transport: &mcpTap{key: "cs_wrong", wire: wire}}}, nil); err == nil {
		t.Error("the Go client connected with an unknown key")
	}

	cs := mcpHTTP(t, srv, srv.APIKey, wire)
	listed := toolsThatCanRun(srv.Service.ActionNames())
	unknown := "op_" + strings.Repeat("b", 26)
	// One operation awaits approval, so that a link exists which none of
	// the failure cases may reveal.
	var secrets []string
	pending := unknown
	if slices.Contains(srv.Service.ActionNames(), "email.send") {
		pending = mcpOK(t, cs, mcpserver.ToolPrepareEmail, emailTo("client@example.com", nil)).op.OperationKey
		mcpOK(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": pending})
		secrets = linkSecrets(srv.consoleLink(t, pending, "you"))
	}
	for _, c := range []struct {
		tool string
		args any
		code approval.Code
	}{
		{"prepare_email", map[string]any{"subject": "x", "text": "y"}, approval.CodeInvalidInput},
		{"prepare_email", map[string]any{"to": "a@example.com", "subject": "x", "text": "y"}, approval.CodeInvalidInput},
		{"prepare_email", map[string]any{"to": []string{"a@example.com"}, "subject": 1, "text": "y"}, approval.CodeInvalidInput},
		{"prepare_slack_message", map[string]any{"channel": "#general"}, approval.CodeInvalidInput},
		{"prepare_http_request", map[string]any{"target": "calendar", "method": "PATCH"}, approval.CodeInvalidInput},
		{"get_operation_status", map[string]any{"operation_key": unknown}, approval.CodeNotFound},
		{"get_operation_status", map[string]any{"operation_key": unknown, "wait_seconds": 31}, approval.CodeInvalidInput},
		{"get_operation_status", map[string]any{"operation_key": unknown, "wait_seconds": -3}, approval.CodeInvalidInput},
		{"get_operation_status", map[string]any{"operation_key": unknown, "wait_seconds": "10"}, approval.CodeInvalidInput},
		{"get_operation_status", map[string]any{}, approval.CodeInvalidInput},
		{"send_operation", map[string]any{"operation_key": unknown}, approval.CodeNotFound},
		{"send_operation", map[string]any{"operation_key": "op_../../x"}, approval.CodeNotFound},
		{"cancel_operation", map[string]any{"operation_key": unknown}, approval.CodeNotFound},
		{"prepare_undo", map[string]any{"operation_key": unknown}, approval.CodeNotFound},
		{"list_operations", map[string]any{"status": "finished"}, approval.CodeInvalidInput},
		{"get_operation_status", map[string]any{"operation_key": pending, "wait_seconds": 99}, approval.CodeInvalidInput},
		{"send_operation", map[string]any{"operation_key": pending, "approve": true}, approval.CodeInvalidInput},
	} {
		if !slices.Contains(listed, c.tool) {
			// Not listed here (its action is not configured): the client
			// is told the tool does not exist, and nothing is stored.
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args}); err == nil {
				t.Errorf("%s is not listed, yet the call succeeded", c.tool)
			}
			continue
		}
		mcpFails(t, cs, c.tool, c.args, c.code)
	}
	stored := 0 // the pending operation, when there is one
	if pending != unknown {
		stored = 1
	}
	st, body := srv.call(t, "GET", "/v1/operations", srv.APIKey, "")
	if st != 200 || strings.Count(string(body), `"operation_key"`) != stored {
		t.Fatalf("bad arguments stored something: %d %s", st, body)
	}
	if secrets != nil {
		scanForLinks(t, secrets, map[string]string{"wire": wire.String(), "log": srv.Stderr.String()})
	}

	if slices.Contains(srv.Service.ActionNames(), "email.send") {
		// idempotency_key makes prepare idempotent.
		args := emailTo("client@example.com", map[string]any{"idempotency_key": "invoice-42"})
		first := mcpOK(t, cs, mcpserver.ToolPrepareEmail, args)
		again := mcpOK(t, cs, mcpserver.ToolPrepareEmail, args)
		if first.op.OperationKey != again.op.OperationKey || !strings.Contains(again.text, "already prepared") {
			t.Errorf("idempotency: %s vs %s, %q", first.op.OperationKey, again.op.OperationKey, again.text)
		}
		args["subject"] = "Something else"
		mcpFails(t, cs, mcpserver.ToolPrepareEmail, args, approval.CodeIdempotencyKeyReused)
		mcpFails(t, cs, mcpserver.ToolPrepareEmail, emailTo("not an address", nil), approval.CodeInvalidInput)
	} else {
		t.Log("email.send is not wired into serve yet: idempotency is covered by TestMCPHTTPRequestLoop")
	}
}

// mcpTarget is a small calendar API with ETags for http.request: every
// /api/events/{id} starts as doc; writes are counted.
type mcpTarget struct {
	mu     sync.Mutex
	doc    map[string]any // the initial document, and that of event 42
	events map[string]map[string]any
	ver    map[string]int
	writes int
}

func (s *mcpTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !strings.HasPrefix(r.URL.Path, "/api/events/") {
		w.WriteHeader(404)
		return
	}
	if s.events == nil {
		s.events, s.ver = map[string]map[string]any{"/api/events/42": s.doc}, map[string]int{}
	}
	doc, ok := s.events[r.URL.Path]
	if !ok {
		doc = map[string]any{}
		for k, v := range s.events["/api/events/42"] {
			doc[k] = v
		}
		s.events[r.URL.Path] = doc
	}
	etag := fmt.Sprintf(`"v%d"`, s.ver[r.URL.Path])
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("ETag", etag)
		_ = json.NewEncoder(w).Encode(doc)
	case http.MethodPatch:
		if im := r.Header.Get("If-Match"); im != "" && im != etag {
			w.WriteHeader(412)
			return
		}
		var patch map[string]any
		_ = json.NewDecoder(r.Body).Decode(&patch)
		for k, v := range patch {
			doc[k] = v
		}
		s.ver[r.URL.Path]++
		s.writes++
		w.Header().Set("ETag", fmt.Sprintf(`"v%d"`, s.ver[r.URL.Path]))
		_ = json.NewEncoder(w).Encode(doc)
	default:
		w.WriteHeader(405)
	}
}

const mcpNarrowKey = "cs_test_mcp_narrow_key_only_billing"

func mcpConfig(targetURL string) string {
	return fmt.Sprintf(`
principals:
  - {id: agent, api_key_sha256: %q, scopes: ["http.request:calendar"]}
  - {id: narrow, api_key_sha256: %q, scopes: ["http.request:billing"]}
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com}
targets:
  - name: calendar
    base_url: %s/api
    allow_private: true
    allow: [{method: PATCH, path: "/events/*"}]
    state: {fields: [title, start]}
  - name: billing
    base_url: %s/billing
    allow_private: true
    allow: [{method: POST, path: /invoices}]
routes:
  - name: everything
    approvers: {ids: [grace]}
    notify: [console]
`, testKeyHash, apiKeyHash(mcpNarrowKey), targetURL, targetURL)
}

// TestMCPHTTPRequestLoop runs the loop with prepare_http_request from a
// policy file, over streamable HTTP: the diff in the preview, approval by
// link, one write; then the scope, idempotency and send-twice checks.
func TestMCPHTTPRequestLoop(t *testing.T) {
	target := &mcpTarget{doc: map[string]any{"title": "Standup", "start": "09:00"}}
	ts := httptest.NewServer(target)
	defer ts.Close()
	srv := startService(t, serviceOpts{Config: mcpConfig(ts.URL)})
	requireAction(t, srv, "http.request")
	wire := &syncBuffer{}
	cs := mcpHTTP(t, srv, srv.APIKey, wire)

	args := map[string]any{"target": "calendar", "method": "PATCH", "path": "/events/42", "body": map[string]any{"title": "Retro"},
		"idempotency_key": "retro-1"}
	p := mcpOK(t, cs, mcpserver.ToolPrepareHTTPRequest, args)
	if again := mcpOK(t, cs, mcpserver.ToolPrepareHTTPRequest, args); again.op.OperationKey != p.op.OperationKey {
		t.Fatalf("idempotency_key: two operations %s %s", p.op.OperationKey, again.op.OperationKey)
	}
	args["body"] = map[string]any{"title": "Other"}
	mcpFails(t, cs, mcpserver.ToolPrepareHTTPRequest, args, approval.CodeIdempotencyKeyReused)
	if len(p.op.Preview.Diff) != 1 || p.op.StateHash == "" {
		t.Errorf("preview diff %v, state hash %q", p.op.Preview.Diff, p.op.StateHash)
	}
	key := p.op.OperationKey
	mcpOK(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": key})
	mcpOK(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": key})
	link := srv.consoleLink(t, key, "grace")
	mcpWaitNotified(t, cs, key)
	done := make(chan time.Time, 1)
	go func() {
		mcpCall(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 30})
		done <- time.Now()
	}()
	time.Sleep(300 * time.Millisecond)
	_, end := decideTimed(t, newBrowser(), link, true)
	select {
	case at := <-done:
		t.Logf("long-poll returned %s after the decision's response", at.Sub(end).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not wake on the decision")
	}
	final := mcpWaitStatus(t, cs, key, approval.StatusSucceeded)
	target.mu.Lock()
	writes, title := target.writes, target.doc["title"]
	target.mu.Unlock()
	if writes != 1 || title != "Retro" {
		t.Fatalf("target: %d writes, title %v (result %s)", writes, title, final.Result)
	}
	if c := strings.Count(srv.Stderr.String(), "operation:   "+key); c != 1 {
		t.Errorf("%d notices for an operation sent twice", c)
	}

	// prepare_undo drafts the write-back, which needs its own approval.
	u := mcpOK(t, cs, mcpserver.ToolPrepareUndo, map[string]any{"operation_key": key})
	if u.op.Undoes != key || u.op.Status != approval.StatusDraft {
		t.Errorf("undo: %+v", u.op)
	}
	mcpOK(t, cs, mcpserver.ToolCancelOperation, map[string]any{"operation_key": u.op.OperationKey})

	// A principal without the scope.
	narrow := mcpHTTP(t, srv, mcpNarrowKey, wire)
	mcpFails(t, narrow, mcpserver.ToolPrepareHTTPRequest,
		map[string]any{"target": "calendar", "method": "PATCH", "path": "/events/42", "body": map[string]any{"title": "X"}},
		approval.CodeInsufficientScope)
	mcpFails(t, narrow, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key}, approval.CodeNotFound)
	if l := mcpOK(t, narrow, mcpserver.ToolListOperations, nil); len(l.list.Operations) != 0 {
		t.Errorf("narrow lists %d operations", len(l.list.Operations))
	}
	scanForLinks(t, linkSecrets(link), map[string]string{"wire": wire.String(), "log": srv.Stderr.String()})
}

// TestMCPShutdownEndsLongPoll: a 30 s long-poll over /mcp does not hold up
// a graceful shutdown.
func TestMCPShutdownEndsLongPoll(t *testing.T) {
	target := &mcpTarget{doc: map[string]any{"title": "Standup", "start": "09:00"}}
	ts := httptest.NewServer(target)
	defer ts.Close()
	srv := startService(t, serviceOpts{Config: mcpConfig(ts.URL)})
	requireAction(t, srv, "http.request")
	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	key := mcpOK(t, cs, mcpserver.ToolPrepareHTTPRequest,
		map[string]any{"target": "calendar", "method": "PATCH", "path": "/events/42", "body": map[string]any{"title": "Retro"}}).op.OperationKey
	returned := make(chan time.Time, 1)
	go func() {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolGetOperationStatus,
			Arguments: map[string]any{"operation_key": key, "wait_seconds": 30}})
		returned <- time.Now()
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	srv.stop(t)
	took := time.Since(start)
	t.Logf("Close took %s with a long-poll open", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("shutdown took %s with a long-poll open", took)
	}
	select {
	case at := <-returned:
		t.Logf("the long-poll returned %s after Close started", at.Sub(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Error("the long-poll never returned")
	}
}

// buildBinary builds countersign into a temporary directory.
func buildBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "countersign")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// mcpStdio spawns `countersign mcp` with only COUNTERSIGN_URL and
// COUNTERSIGN_API_KEY in its environment, and connects the Go SDK client.
func mcpStdio(t testing.TB, bin, serviceURL, key string, wire, stderr *syncBuffer) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(bin, "mcp")
	cmd.Env = []string{"COUNTERSIGN_URL=" + serviceURL, "COUNTERSIGN_API_KEY=" + key}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-host", Version: "0"}, nil).Connect(context.Background(),
		&mcp.LoggingTransport{Transport: &mcp.CommandTransport{Command: cmd}, Writer: wire}, nil)
	if err != nil {
		t.Fatalf("connect to countersign mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestMCPStdioBridge: the built binary, spawned as a host would, bridging
// to a running service over REST.
func TestMCPStdioBridge(t *testing.T) {
	bin := buildBinary(t)
	target := &mcpTarget{doc: map[string]any{"title": "Standup", "start": "09:00"}}
	ts := httptest.NewServer(target)
	defer ts.Close()
	srv := startService(t, serviceOpts{Config: mcpConfig(ts.URL)})
	requireAction(t, srv, "http.request")
	wire, bridgeLog := &syncBuffer{}, &syncBuffer{}
	cs := mcpStdio(t, bin, srv.URL(), srv.APIKey, wire, bridgeLog)

	lt, err := cs.ListTools(context.Background(), nil)
	must(t, err)
	// The bridge lists what the service serves (GET /v1/tools).
	if want := mcpserver.Tools(&mcpserver.Options{Actions: srv.Service.ActionNames()}); len(lt.Tools) != len(want) {
		t.Fatalf("%d tools over stdio, the service serves %d", len(lt.Tools), len(want))
	}
	if !strings.Contains(cs.InitializeResult().Instructions, "send_operation") {
		t.Error("no server instructions over stdio")
	}

	// The loop: the bridge prepares, sends and long-polls over REST.
	key := mcpOK(t, cs, mcpserver.ToolPrepareHTTPRequest,
		map[string]any{"target": "calendar", "method": "PATCH", "path": "/events/42", "body": map[string]any{"title": "Retro"}}).op.OperationKey
	mcpOK(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": key})
	link := srv.consoleLink(t, key, "grace")
	mcpWaitNotified(t, cs, key)
	done := make(chan time.Time, 1)
	go func() {
		mcpCall(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 30})
		done <- time.Now()
	}()
	time.Sleep(300 * time.Millisecond)
	_, end := decideTimed(t, newBrowser(), link, true)
	select {
	case at := <-done:
		t.Logf("stdio long-poll returned %s after the decision's response", at.Sub(end).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the stdio long-poll did not wake on the decision")
	}
	mcpWaitStatus(t, cs, key, approval.StatusSucceeded)

	if slices.Contains(srv.Service.ActionNames(), "email.send") {
		e := mcpOK(t, cs, mcpserver.ToolPrepareEmail, emailTo("client@example.com", nil))
		mcpOK(t, cs, mcpserver.ToolCancelOperation, map[string]any{"operation_key": e.op.OperationKey})
	}

	// Errors come through the bridge with their codes.
	mcpFails(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": "op_" + strings.Repeat("c", 26)}, approval.CodeNotFound)
	mcpFails(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 99}, approval.CodeInvalidInput)
	mcpFails(t, cs, mcpserver.ToolPrepareHTTPRequest, map[string]any{"target": "calendar"}, approval.CodeInvalidInput)
	mcpFails(t, cs, mcpserver.ToolPrepareHTTPRequest,
		map[string]any{"target": "calendar", "method": "PATCH", "path": "/admin/1", "body": map[string]any{}}, approval.CodePolicyDenied)
	mcpFails(t, cs, mcpserver.ToolListOperations, map[string]any{"status": "nope"}, approval.CodeInvalidInput)

	// A bridge with an unknown key: every tool says unauthenticated.
	badLog := &syncBuffer{}
	bad := mcpStdio(t, bin, srv.URL(), "cs_not_a_key", wire, badLog)
	mcpFails(t, bad, mcpserver.ToolListOperations, nil, approval.CodeUnauthenticated)
	// A bridge pointed at nothing: unavailable, and it says so.
	gone := mcpStdio(t, bin, "http://127.0.0.1:1", srv.APIKey, wire, badLog)
	mcpFails(t, gone, mcpserver.ToolListOperations, nil, approval.CodeUnavailable)

	// Logs are JSON lines on stderr; stdout carried the protocol only
	// (the client would have failed on anything else).
	for _, line := range strings.Split(strings.TrimSpace(bridgeLog.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("bridge stderr line is not a JSON log line: %q", line)
		}
	}
	scanForLinks(t, linkSecrets(link), map[string]string{
		"wire": wire.String(), "log of the bridge": bridgeLog.String() + badLog.String(), "log of serve": srv.Stderr.String(),
	})
}

// TestMCPCommandReadsOnlyItsTwoVariables: `countersign mcp` looks at
// COUNTERSIGN_URL and COUNTERSIGN_API_KEY and nothing else (no Slack, SMTP,
// target or link secrets), and refuses to start without them.
func TestMCPCommandReadsOnlyItsTwoVariables(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	env := func(vals map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			mu.Lock()
			seen[k] = true
			mu.Unlock()
			v, ok := vals[k]
			return v, ok
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"mcp"}, strings.NewReader(""), &stdout, &stderr, env(nil)); code == 0 ||
		!strings.Contains(stderr.String(), "COUNTERSIGN_URL") {
		t.Errorf("without configuration: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"mcp"}, strings.NewReader(""), &stdout, &stderr,
		env(map[string]string{"COUNTERSIGN_URL": "http://127.0.0.1:1"})); code == 0 || !strings.Contains(stderr.String(), "COUNTERSIGN_API_KEY") {
		t.Errorf("without a key: exit %d, %q", code, stderr.String())
	}
	stderr.Reset()
	// With both, it serves stdin until EOF (here: at once) and exits 0.
	if code := run(context.Background(), []string{"mcp"}, strings.NewReader(""), &stdout, &stderr,
		env(map[string]string{"COUNTERSIGN_URL": "http://127.0.0.1:1", "COUNTERSIGN_API_KEY": "k"})); code != 0 {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout carried something other than the protocol: %q", stdout.String())
	}
	mu.Lock()
	defer mu.Unlock()
	for k := range seen {
		if k != "COUNTERSIGN_URL" && k != "COUNTERSIGN_API_KEY" {
			t.Errorf("countersign mcp read %s", k)
		}
	}
}

// TestMCPMeasure prints the round-trip time of a prepare over MCP
// streamable HTTP and the wake latency of get_operation_status's long-poll
// after a human decides (p50/p99). It asserts nothing about time; run it
// on purpose:
//
//	COUNTERSIGN_MCP_MEASURE=1 go test -run TestMCPMeasure -v ./cmd/countersign
//
// COUNTERSIGN_MCP_MEASURE_N sets the number of wake runs (default 100;
// prepares are twice that). It uses prepare_email when email.send is wired
// into serve, and prepare_http_request against a local target otherwise or
// when COUNTERSIGN_MCP_MEASURE_ACTION=http.request.
func TestMCPMeasure(t *testing.T) {
	if os.Getenv("COUNTERSIGN_MCP_MEASURE") == "" {
		t.Skip("set COUNTERSIGN_MCP_MEASURE=1 to measure")
	}
	n := 100
	if v, err := strconv.Atoi(os.Getenv("COUNTERSIGN_MCP_MEASURE_N")); err == nil && v > 0 {
		n = v
	}
	target := &mcpTarget{doc: map[string]any{"title": "Standup", "start": "09:00"}}
	ts := httptest.NewServer(target)
	defer ts.Close()

	// start returns a fresh service (its own Redis database or miniredis,
	// so the principal's per-minute budget starts at zero) and the tool
	// and arguments to prepare with.
	start := func(t *testing.T) (*testService, string, func(i int) map[string]any, string) {
		dev := startService(t, serviceOpts{Workers: 2})
		if slices.Contains(dev.Service.ActionNames(), "email.send") && os.Getenv("COUNTERSIGN_MCP_MEASURE_ACTION") != "http.request" {
			return dev, mcpserver.ToolPrepareEmail, func(i int) map[string]any {
				return emailTo("client@example.com", map[string]any{"subject": fmt.Sprintf("Invoice %d", i)})
			}, "you"
		}
		// (dev is not stopped here: Main.Close right after Open can hang,
		// see the report; it stops with the test.)
		srv := startService(t, serviceOpts{Config: mcpConfig(ts.URL), Workers: 2})
		return srv, mcpserver.ToolPrepareHTTPRequest, func(i int) map[string]any {
			return map[string]any{"target": "calendar", "method": "PATCH", "path": fmt.Sprintf("/events/%d", 1000+i),
				"body": map[string]any{"title": fmt.Sprintf("Retro %d", i)}}
		}, "grace"
	}

	t.Run("prepare", func(t *testing.T) {
		srv, tool, args, _ := start(t)
		cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
		for i := 0; i < 10; i++ { // warm up
			mcpOK(t, cs, tool, args(-i))
		}
		var prep, status []time.Duration
		for i := 0; i < 2*n; i++ {
			t0 := time.Now()
			o := mcpOK(t, cs, tool, args(i))
			prep = append(prep, time.Since(t0))
			if i%2 == 0 {
				t0 = time.Now()
				mcpOK(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": o.op.OperationKey})
				status = append(status, time.Since(t0))
			}
		}
		t.Logf("MEASURE %s round trip over MCP HTTP (Go SDK client, stateless /mcp through fiber): %s", tool, stats(prep))
		t.Logf("MEASURE get_operation_status (no wait) round trip: %s", stats(status))
	})

	t.Run("wake", func(t *testing.T) {
		srv, tool, args, approver := start(t)
		cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
		poller := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
		var fromStart, fromEnd []time.Duration
		for i := 0; i < n; i++ {
			key := mcpOK(t, cs, tool, args(i)).op.OperationKey
			mcpOK(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": key})
			link := linkOn(t, key, approver, srv)
			if o := mcpOK(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key}); len(o.op.Approval.Notified) == 0 {
				mcpOK(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 5})
			}
			done := make(chan time.Time, 1)
			go func() {
				o := mcpCall(t, poller, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 30})
				if o.err != nil || o.op.Status == approval.StatusPending {
					t.Errorf("long-poll: %+v %s", o.err, o.op.Status)
				}
				done <- time.Now()
			}()
			time.Sleep(100 * time.Millisecond)
			s, e := decideTimed(t, newBrowser(), link, true)
			var at time.Time
			select {
			case at = <-done:
			case <-time.After(40 * time.Second):
				t.Fatalf("run %d: the long-poll never returned", i)
			}
			fromStart = append(fromStart, at.Sub(s))
			fromEnd = append(fromEnd, at.Sub(e))
		}
		t.Logf("MEASURE long-poll wake after the deciding POST started (upper bound): %s", stats(fromStart))
		t.Logf("MEASURE long-poll wake after the deciding POST's response (lower bound; negative = before it): %s", stats(fromEnd))
	})
}

// stats formats n, p50, p90, p99 and max of ds.
func stats(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", len(s), ms(q(0.50)), ms(q(0.90)), ms(q(0.99)), ms(s[len(s)-1]))
}

// TestMCPTypeScriptSDKThroughServe runs the official TypeScript SDK client
// (mcpserver/testdata/tsclient/client.mjs) against /mcp of the whole
// service, through fiber: refused without a key, eight tools, prepare_email
// (with output-schema validation in the SDK), send, a bad wait_seconds, and
// a long-poll that wakes when the test approves through the link. It runs
// only where node is installed and the SDK was fetched (npm ci in that
// directory).
func TestMCPTypeScriptSDKThroughServe(t *testing.T) {
	srv := startService(t, serviceOpts{})
	requireAction(t, srv, "email.send")
	var link string
	steps, out := runTSClient(t, "client.mjs", []string{"MCP_URL=" + srv.URL() + "/mcp", "API_KEY=" + srv.APIKey}, func(step string, value json.RawMessage) {
		if step == "waiting" {
			var key string
			must(t, json.Unmarshal(value, &key))
			link = srv.consoleLink(t, key, "you")
			time.Sleep(200 * time.Millisecond)
			newBrowser().decide(t, link, "approve", "")
		}
	})
	for _, want := range []struct{ step, text string }{
		{"unauthenticated", "unauthenticated"},
		{"prepare", `"status":"draft"`},
		{"send", `"status":"pending_approval"`},
		{"bad", `"code":"invalid_input"`},
		{"status", `"approvals":[{`},
	} {
		if !strings.Contains(string(steps[want.step]), want.text) {
			t.Errorf("%s: %s lacks %s", want.step, steps[want.step], want.text)
		}
	}
	// Development mode has email.send only: the tools that can run, and
	// request_allowance (it asks a human; allowances can cover email.send).
	var tools []struct {
		Name string `json:"name"`
	}
	must(t, json.Unmarshal(steps["tools"], &tools))
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{"cancel_operation", "get_operation_status", "list_operations", "prepare_email", "request_allowance", "send_operation"}; !slices.Equal(names, want) {
		t.Errorf("tools over the TypeScript SDK in development mode: %v, want %v", names, want)
	}
	// A refusal tells an OAuth-capable client that a bearer API key is
	// needed, through RFC 9728 metadata naming no authorization server.
	var auth struct {
		Status              int    `json:"status"`
		Challenge           string `json:"challenge"`
		ResourceMetadataURL string `json:"resourceMetadataUrl"`
		Metadata            struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			BearerMethods        []string `json:"bearer_methods_supported"`
			ResourceName         string   `json:"resource_name"`
		} `json:"metadata"`
	}
	must(t, json.Unmarshal(steps["auth"], &auth))
	if auth.Status != 401 || auth.ResourceMetadataURL != srv.URL()+"/.well-known/oauth-protected-resource/mcp" ||
		!strings.Contains(auth.Challenge, "API key") || auth.Metadata.Resource != srv.URL()+"/mcp" ||
		len(auth.Metadata.AuthorizationServers) != 0 || !slices.Equal(auth.Metadata.BearerMethods, []string{"header"}) ||
		!strings.Contains(auth.Metadata.ResourceName, "Authorization: Bearer") {
		t.Errorf("the SDK's view of a refusal: %s", steps["auth"])
	}
	scanForLinks(t, linkSecrets(link), map[string]string{"TypeScript client output": out, "log": srv.Stderr.String()})
}

// TestMCPNewestProtocolThroughServe: the TypeScript SDK v2 client (with
// version negotiation on) and the Go SDK client both get the newest
// revision the Go SDK supports (2026-07-28) from /mcp of the whole
// service, and use the tools at it.
func TestMCPNewestProtocolThroughServe(t *testing.T) {
	srv := startService(t, serviceOpts{})
	newest := mcp.SupportedProtocolVersions()[0]
	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	if got := cs.InitializeResult().ProtocolVersion; got != newest {
		t.Errorf("Go SDK client negotiated %s, want %s", got, newest)
	}
	mcpOK(t, cs, mcpserver.ToolListOperations, map[string]any{})

	node, err := exec.LookPath("node")
	dir, _ := filepath.Abs("../../mcpserver/testdata/tsclient")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "client"))
	}
	if err != nil {
		t.Skip("node or the TypeScript SDK v2 client is not installed: run npm ci in mcpserver/testdata/tsclient")
	}
	cmd := exec.Command(node, "modern.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+srv.URL()+"/mcp", "API_KEY="+srv.APIKey)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("node modern.mjs: %v\n%s", err, stderr.String())
	}
	steps := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var s struct {
			Step  string          `json:"step"`
			Value json.RawMessage `json:"value"`
		}
		must(t, json.Unmarshal([]byte(l), &s))
		steps[s.Step] = string(s.Value)
	}
	for step, want := range map[string]string{
		"unauthenticated": "401", "negotiated": `"version":"` + newest + `"`, "tools": `"prepare_email"`,
		"prepare": `"status":"draft"`,
	} {
		if !strings.Contains(steps[step], want) {
			t.Errorf("TypeScript SDK v2 %s: %s lacks %s", step, steps[step], want)
		}
	}
}

// toolsThatCanRun are the tools /mcp lists for a service with these
// actions, sorted.
func toolsThatCanRun(actions []string) []string {
	out := []string{mcpserver.ToolSendOperation, mcpserver.ToolGetOperationStatus, mcpserver.ToolCancelOperation, mcpserver.ToolListOperations}
	for tool, action := range map[string]string{mcpserver.ToolPrepareEmail: mcpserver.ActionEmailSend,
		mcpserver.ToolPrepareSlackMessage: mcpserver.ActionSlackPostMessage, mcpserver.ToolPrepareHTTPRequest: mcpserver.ActionHTTPRequest} {
		if slices.Contains(actions, action) {
			out = append(out, tool)
		}
	}
	if slices.Contains(actions, mcpserver.ActionSlackPostMessage) || slices.Contains(actions, mcpserver.ActionHTTPRequest) {
		out = append(out, mcpserver.ToolPrepareUndo)
	}
	if slices.Contains(actions, "allowance.grant") {
		out = append(out, mcpserver.ToolRequestAllowance)
	}
	sort.Strings(out)
	return out
}

// runTSClient runs script of mcpserver/testdata/tsclient (the official
// TypeScript SDK) with env and returns its steps and its whole output:
// each stdout line is {"step", "value"}, and onStep sees each as it
// arrives, so that the test can act as the human. It skips where node or
// the SDK is not installed.
func runTSClient(t *testing.T, script string, env []string, onStep func(step string, value json.RawMessage)) (steps map[string]json.RawMessage, out string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir, _ := filepath.Abs("../../mcpserver/testdata/tsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("the TypeScript SDK is not installed: run npm ci in mcpserver/testdata/tsclient")
	}
	cmd := exec.Command(node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var all strings.Builder
	steps = map[string]json.RawMessage{}
	dec := json.NewDecoder(stdout)
	for {
		var s struct {
			Step  string          `json:"step"`
			Value json.RawMessage `json:"value"`
		}
		if err := dec.Decode(&s); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("reading the TypeScript client: %v\n%s", err, stderr.String())
		}
		raw, _ := json.Marshal(s)
		all.Write(append(raw, '\n'))
		steps[s.Step] = s.Value
		onStep(s.Step, s.Value)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	return steps, all.String()
}
