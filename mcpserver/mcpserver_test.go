package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// decides matches any wording of a tool that would let the agent decide.
var decides = regexp.MustCompile(`(?i)approv|reject|decid|decision|confirm|consent|authori[sz]e|sign[-_ ]?off|countersign_|grant|allow($|[^a])`)

// decidingVerb matches a title or description that opens by deciding.
var decidingVerb = regexp.MustCompile(`(?i)^\W*(approve|reject|decide|confirm|authori[sz]e|accept|deny|grant|allow|sign)`)

// TestToolsListHasNoWayToDecide pins the tool surface: exactly the nine
// tools of SPEC §6, none of which approves, rejects or decides
// (request_allowance asks a human for an allowance; it grants nothing). If anyone
// adds a tool, this test fails until the list here is changed on purpose.
func TestToolsListHasNoWayToDecide(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			cs := h.connect(t, tr, agentKey)
			lt, err := cs.ListTools(context.Background(), nil)
			must(t, err)
			var names []string
			for _, tool := range lt.Tools {
				names = append(names, tool.Name)
				if decides.MatchString(tool.Name) {
					t.Errorf("tool %q is named like a decision", tool.Name)
				}
				// A title or description may say that a human approves; it
				// must not open by offering to do it.
				first, _, _ := strings.Cut(tool.Description, ".")
				for _, text := range []string{tool.Title, tool.Annotations.Title, first} {
					if decidingVerb.MatchString(text) {
						t.Errorf("tool %q presents itself as deciding: %q", tool.Name, text)
					}
				}
				schema, _ := json.Marshal(tool.InputSchema)
				var s struct {
					Properties map[string]any `json:"properties"`
				}
				must(t, json.Unmarshal(schema, &s))
				for p := range s.Properties {
					if decides.MatchString(p) || regexp.MustCompile(`(?i)token|link|nonce|signature|capabilit`).MatchString(p) {
						t.Errorf("tool %q takes an argument named like a decision or capability: %q", tool.Name, p)
					}
				}
				if tool.OutputSchema == nil {
					t.Errorf("tool %q has no output schema", tool.Name)
				}
			}
			allowed := []string{"prepare_email", "prepare_slack_message", "prepare_http_request", "prepare_undo",
				"send_operation", "get_operation_status", "cancel_operation", "list_operations", "request_allowance"}
			slices.Sort(names)
			slices.Sort(allowed)
			if !slices.Equal(names, allowed) {
				t.Fatalf("tools = %v\nwant exactly %v (no tool may approve, reject or decide)", names, allowed)
			}
			if ins := cs.InitializeResult().Instructions; !strings.Contains(ins, "send_operation") || !strings.Contains(ins, "never") {
				t.Errorf("instructions do not explain the flow: %q", ins)
			}
		})
	}
}

// TestAnnotations pins the annotations of SPEC §6.
func TestAnnotations(t *testing.T) {
	h := newHarness(t)
	cs := h.connect(t, viaHTTP, agentKey)
	lt, err := cs.ListTools(context.Background(), nil)
	must(t, err)
	type hints struct {
		ReadOnly    bool  `json:"readOnlyHint"`
		Destructive *bool `json:"destructiveHint"`
		Idempotent  bool  `json:"idempotentHint"`
		OpenWorld   *bool `json:"openWorldHint"`
	}
	f, tr := false, true
	want := map[string]hints{
		"prepare_email":         {Destructive: &f, Idempotent: true},
		"prepare_slack_message": {Destructive: &f, Idempotent: true},
		"prepare_http_request":  {Destructive: &f, Idempotent: true},
		"prepare_undo":          {Destructive: &f, Idempotent: true},
		"send_operation":        {Destructive: &tr, Idempotent: true, OpenWorld: &tr},
		"get_operation_status":  {ReadOnly: true},
		"cancel_operation":      {Idempotent: true},
		"list_operations":       {ReadOnly: true},
		"request_allowance":     {Destructive: &f, Idempotent: true},
	}
	for _, tool := range lt.Tools {
		b, _ := json.Marshal(tool.Annotations)
		var got hints
		must(t, json.Unmarshal(b, &got))
		w := want[tool.Name]
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(w)
		if string(gb) != string(wb) {
			t.Errorf("%s annotations = %s, want %s", tool.Name, gb, wb)
		}
	}
}

// TestFullLoop: prepare_email → send_operation → the human approves through
// the link → get_operation_status with wait_seconds wakes on the decision →
// succeeded. Nothing any transport returns, and no log line, carries the
// link or any part of it.
func TestFullLoop(t *testing.T) {
	h := newHarness(t)
	var texts = map[string]string{}
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			cs := h.connect(t, tr, agentKey)
			p := ok(t, cs, mcpserver.ToolPrepareEmail, emailArgs(map[string]any{"cc": []string{"boss@example.com"}}))
			if p.op.Status != approval.StatusDraft || !approval.ValidOperationKey(p.op.OperationKey) {
				t.Fatalf("prepare = %+v", p.op)
			}
			if !strings.Contains(p.text, "Not sent") || !strings.Contains(p.text, "send_operation") || !strings.Contains(p.text, "never receive") {
				t.Errorf("prepare text does not say what happened and what to do: %q", p.text)
			}
			if !strings.Contains(string(p.op.Input), `"client@example.com"`) {
				t.Errorf("input is not the normalized input: %s", p.op.Input)
			}
			key := p.op.OperationKey

			s := ok(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": key})
			if s.op.Status != approval.StatusPending {
				t.Fatalf("send = %s", s.op.Status)
			}
			for _, want := range []string{"will not receive a token", "get_operation_status", "wait_seconds"} {
				if !strings.Contains(s.text, want) {
					t.Errorf("send text lacks %q: %q", want, s.text)
				}
			}
			h.inbox.link(t, key)
			// Wait for the delivery to be recorded, so that the long-poll
			// below wakes on the decision and not on the notification.
			deadline := time.Now().Add(5 * time.Second)
			for len(ok(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key}).op.Approval.Notified) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the notification was never recorded")
				}
				time.Sleep(10 * time.Millisecond)
			}

			type polled struct {
				r  toolResult
				at time.Time
			}
			done := make(chan polled, 1)
			go func() {
				r := call(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 30})
				done <- polled{r, time.Now()}
			}()
			time.Sleep(200 * time.Millisecond) // let the long-poll start
			decided := time.Now()
			h.approve(t, key, true, "")
			var got polled
			select {
			case got = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the long-poll did not wake on the decision")
			}
			if got.r.err != nil {
				t.Fatalf("long-poll: %v", got.r.err)
			}
			wake := got.at.Sub(decided)
			t.Logf("%s: long-poll returned %s after the decision started (status %s)", tr, wake.Round(time.Millisecond), got.r.op.Status)
			if wake > 2*time.Second {
				t.Errorf("long-poll returned %s after the decision; want well under a second", wake)
			}
			if got.r.op.Status == approval.StatusPending || len(got.r.op.Approval.Approvals) != 1 {
				t.Errorf("after approval: %s %+v", got.r.op.Status, got.r.op.Approval)
			}

			final := waitStatus(t, cs, key, approval.StatusSucceeded)
			if !strings.Contains(string(final.Result), "message_id") {
				t.Errorf("result = %s", final.Result)
			}
			st := ok(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key})
			if !strings.Contains(st.text, "Done") {
				t.Errorf("status text after success: %q", st.text)
			}
			texts[string(tr)+" texts"] = p.text + s.text + got.r.text + st.text
		})
	}
	if got := h.email.runs.Load(); got != int32(len(transports)) {
		t.Errorf("email executed %d times for %d operations", got, len(transports))
	}
	texts["wire"] = h.wire.String()
	texts["logs"] = h.logs.String()
	assertNoSecrets(t, h.secrets(), texts)
}

// TestBadArguments: wrong types, missing fields, unknown arguments, unknown
// keys and wait_seconds out of range are tool errors with the contract's
// codes, and nothing is stored.
func TestBadArguments(t *testing.T) {
	h := newHarness(t)
	unknownKey := "op_" + strings.Repeat("a", 26)
	cases := []struct {
		name  string
		tool  string
		args  any
		code  approval.Code
		field string
	}{
		{"missing to", "prepare_email", emailArgs(map[string]any{"to": nil}), approval.CodeInvalidInput, "to"},
		{"missing subject", "prepare_email", emailArgs(map[string]any{"subject": nil}), approval.CodeInvalidInput, "subject"},
		{"null text", "prepare_email", emailArgs(map[string]any{"text": json.RawMessage("null")}), approval.CodeInvalidInput, "text"},
		{"to is a string", "prepare_email", emailArgs(map[string]any{"to": "a@example.com"}), approval.CodeInvalidInput, "to"},
		{"to holds a number", "prepare_email", emailArgs(map[string]any{"to": []any{42}}), approval.CodeInvalidInput, "to"},
		{"subject is a number", "prepare_email", emailArgs(map[string]any{"subject": 7}), approval.CodeInvalidInput, "subject"},
		{"unknown argument", "prepare_email", emailArgs(map[string]any{"from": "me@example.com"}), approval.CodeInvalidInput, "from"},
		{"not an address", "prepare_email", emailArgs(map[string]any{"to": []string{"nobody"}}), approval.CodeInvalidInput, "to[0]"},
		{"bad idempotency key", "prepare_email", emailArgs(map[string]any{"idempotency_key": "has space"}), approval.CodeInvalidInput, "idempotency_key"},
		{"empty arguments", "prepare_slack_message", map[string]any{}, approval.CodeInvalidInput, "channel"},
		{"unconfigured action", "prepare_http_request", map[string]any{"target": "calendar", "method": "PATCH", "path": "/events/1"}, approval.CodeUnknownAction, ""},
		{"query not an object", "prepare_http_request", map[string]any{"target": "calendar", "method": "PATCH", "path": "/e", "query": []string{"x"}}, approval.CodeInvalidInput, "query"},
		{"send without key", "send_operation", map[string]any{}, approval.CodeInvalidInput, "operation_key"},
		{"send unknown key", "send_operation", map[string]any{"operation_key": unknownKey}, approval.CodeNotFound, ""},
		{"send malformed key", "send_operation", map[string]any{"operation_key": "../../v1/operations"}, approval.CodeNotFound, ""},
		{"status unknown key", "get_operation_status", map[string]any{"operation_key": unknownKey}, approval.CodeNotFound, ""},
		{"status key is a number", "get_operation_status", map[string]any{"operation_key": 12}, approval.CodeInvalidInput, "operation_key"},
		{"wait too long", "get_operation_status", map[string]any{"operation_key": unknownKey, "wait_seconds": 31}, approval.CodeInvalidInput, "wait_seconds"},
		{"wait negative", "get_operation_status", map[string]any{"operation_key": unknownKey, "wait_seconds": -1}, approval.CodeInvalidInput, "wait_seconds"},
		{"wait is a string", "get_operation_status", map[string]any{"operation_key": unknownKey, "wait_seconds": "5"}, approval.CodeInvalidInput, "wait_seconds"},
		{"wait is fractional", "get_operation_status", map[string]any{"operation_key": unknownKey, "wait_seconds": 2.5}, approval.CodeInvalidInput, "wait_seconds"},
		{"cancel unknown key", "cancel_operation", map[string]any{"operation_key": unknownKey}, approval.CodeNotFound, ""},
		{"undo unknown key", "prepare_undo", map[string]any{"operation_key": unknownKey}, approval.CodeNotFound, ""},
		{"list unknown status", "list_operations", map[string]any{"status": "done"}, approval.CodeInvalidInput, "status"},
	}
	// One operation awaits approval, so a link exists that the failure
	// cases below must not reveal.
	pending := ok(t, h.connect(t, viaInMemory, agentKey), mcpserver.ToolPrepareEmail, emailArgs(nil)).op.OperationKey
	ok(t, h.connect(t, viaInMemory, agentKey), mcpserver.ToolSendOperation, map[string]any{"operation_key": pending})
	h.inbox.link(t, pending)
	cases = append(cases, []struct {
		name  string
		tool  string
		args  any
		code  approval.Code
		field string
	}{
		{"wait too long on a pending operation", "get_operation_status", map[string]any{"operation_key": pending, "wait_seconds": 45}, approval.CodeInvalidInput, "wait_seconds"},
		{"undo a pending operation", "prepare_undo", map[string]any{"operation_key": pending}, approval.CodeInvalidState, ""},
		{"send with an extra argument", "send_operation", map[string]any{"operation_key": pending, "approve": true}, approval.CodeInvalidInput, "approve"},
	}...)
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			cs := h.connect(t, tr, agentKey)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					r := fails(t, cs, c.tool, c.args, c.code)
					if c.field != "" {
						fields, _ := r.err.Details["fields"].([]any)
						found := false
						for _, f := range fields {
							if m, _ := f.(map[string]any); m["field"] == c.field {
								found = true
							}
						}
						if !found {
							t.Errorf("details.fields = %v, want %q", r.err.Details["fields"], c.field)
						}
						if !strings.Contains(r.text, c.field) {
							t.Errorf("text does not name %q: %q", c.field, r.text)
						}
					}
				})
			}
		})
	}
	ops, err := h.svc.List(context.Background(), h.agent, "")
	must(t, err)
	if len(ops) != 1 || ops[0].Key != pending || ops[0].Status != approval.StatusPending {
		t.Fatalf("bad arguments stored or changed operations: %d", len(ops))
	}
	assertClean(t, h)
	assertNoSecrets(t, h.secrets(), map[string]string{"wire": h.wire.String(), "logs": h.logs.String()})
}

// assertClean checks that no log line so far carries internal error text
// from a tool.
func assertClean(t *testing.T, h *harness) {
	t.Helper()
	if strings.Contains(h.logs.String(), "mcp tool failed") {
		t.Errorf("a tool hit an internal error:\n%s", h.logs.String())
	}
}

// TestScope: a principal without the scope gets insufficient_scope, and
// nothing is stored.
func TestScope(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			cs := h.connect(t, tr, narrowKey)
			fails(t, cs, mcpserver.ToolPrepareEmail, emailArgs(nil), approval.CodeInsufficientScope)
			// And another principal's operation is not found.
			other := ok(t, h.connect(t, tr, agentKey), mcpserver.ToolPrepareEmail, emailArgs(nil))
			fails(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": other.op.OperationKey}, approval.CodeNotFound)
			fails(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": other.op.OperationKey}, approval.CodeNotFound)
			fails(t, cs, mcpserver.ToolCancelOperation, map[string]any{"operation_key": other.op.OperationKey}, approval.CodeNotFound)
			if l := ok(t, cs, mcpserver.ToolListOperations, nil); len(l.list.Operations) != 0 {
				t.Errorf("narrow sees %d operations", len(l.list.Operations))
			}
		})
	}
	ops, err := h.svc.List(context.Background(), h.narrow, "")
	must(t, err)
	if len(ops) != 0 {
		t.Fatalf("insufficient scope stored %d operations", len(ops))
	}
}

// TestIdempotencyKey: the same key and arguments return the same
// operation; the same key with other arguments is idempotency_key_reused.
func TestIdempotencyKey(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			cs := h.connect(t, tr, agentKey)
			args := emailArgs(map[string]any{"idempotency_key": "invoice-42-" + string(tr)})
			first := ok(t, cs, mcpserver.ToolPrepareEmail, args)
			second := ok(t, cs, mcpserver.ToolPrepareEmail, args)
			if first.op.OperationKey != second.op.OperationKey {
				t.Fatalf("two operations for one idempotency key: %s %s", first.op.OperationKey, second.op.OperationKey)
			}
			if !strings.Contains(second.text, "already prepared") {
				t.Errorf("second prepare text: %q", second.text)
			}
			args["subject"] = "Another subject"
			r := fails(t, cs, mcpserver.ToolPrepareEmail, args, approval.CodeIdempotencyKeyReused)
			if r.err.Details["operation_key"] != first.op.OperationKey {
				t.Errorf("details = %v", r.err.Details)
			}
		})
	}
	ops, _ := h.svc.List(context.Background(), h.agent, "")
	if len(ops) != len(transports) {
		t.Fatalf("%d operations stored, want %d", len(ops), len(transports))
	}
}

// TestSendTwiceNotifiesOnce: send_operation is idempotent; the approvers
// hear about an operation once.
func TestSendTwiceNotifiesOnce(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			cs := h.connect(t, tr, agentKey)
			key := ok(t, cs, mcpserver.ToolPrepareEmail, emailArgs(nil)).op.OperationKey
			a := ok(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": key})
			b := ok(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": key})
			if a.op.Status != approval.StatusPending || b.op.Status != approval.StatusPending {
				t.Fatalf("send twice: %s, %s", a.op.Status, b.op.Status)
			}
			h.inbox.link(t, key)
			time.Sleep(300 * time.Millisecond) // a second notice would have arrived by now
			if n := h.inbox.count(key); n != 1 {
				t.Fatalf("%d notifications for one operation sent twice", n)
			}
		})
	}
}

// TestCancelListUndoReject covers the rest of the tools and the terminal
// states' texts.
func TestCancelListUndoReject(t *testing.T) {
	h := newHarness(t)
	for _, tr := range transports {
		t.Run(string(tr), func(t *testing.T) {
			cs := h.connect(t, tr, agentKey)

			// cancel a draft; sending it afterwards is invalid_state.
			c := ok(t, cs, mcpserver.ToolPrepareEmail, emailArgs(nil)).op.OperationKey
			if r := ok(t, cs, mcpserver.ToolCancelOperation, map[string]any{"operation_key": c}); r.op.Status != approval.StatusCanceled || !strings.Contains(r.text, "Nothing was done") {
				t.Fatalf("cancel: %s %q", r.op.Status, r.text)
			}
			ok(t, cs, mcpserver.ToolCancelOperation, map[string]any{"operation_key": c}) // idempotent
			fails(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": c}, approval.CodeInvalidState)

			// a rejection, with the approver's reason visible.
			r := ok(t, cs, mcpserver.ToolPrepareEmail, emailArgs(map[string]any{"subject": "Discount 90%"})).op.OperationKey
			ok(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": r})
			h.approve(t, r, false, "too generous")
			rej := waitStatus(t, cs, r, approval.StatusRejected)
			if rej.Approval.Rejection == nil || rej.Approval.Rejection.Reason != "too generous" {
				t.Errorf("rejection = %+v", rej.Approval.Rejection)
			}
			st := ok(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": r})
			if !strings.Contains(st.text, "too generous") || !strings.Contains(st.text, "Do not send") {
				t.Errorf("rejected text: %q", st.text)
			}

			// undo: a Slack post can be undone, an email cannot.
			sl := ok(t, cs, mcpserver.ToolPrepareSlackMessage, map[string]any{"channel": "#general", "text": "Deploy done", "thread_ts": "1.2"})
			if !strings.Contains(string(sl.op.Input), `"thread_ts":"1.2"`) {
				t.Errorf("thread_ts not passed: %s", sl.op.Input)
			}
			ok(t, cs, mcpserver.ToolSendOperation, map[string]any{"operation_key": sl.op.OperationKey})
			h.approve(t, sl.op.OperationKey, true, "")
			waitStatus(t, cs, sl.op.OperationKey, approval.StatusSucceeded)
			u := ok(t, cs, mcpserver.ToolPrepareUndo, map[string]any{"operation_key": sl.op.OperationKey})
			if u.op.Status != approval.StatusDraft || u.op.Undoes != sl.op.OperationKey || !strings.Contains(u.text, "own human approval") {
				t.Errorf("undo = %+v %q", u.op, u.text)
			}
			again := ok(t, cs, mcpserver.ToolPrepareUndo, map[string]any{"operation_key": sl.op.OperationKey})
			if again.op.OperationKey != u.op.OperationKey {
				t.Errorf("second undo drafted another operation")
			}
			fails(t, cs, mcpserver.ToolPrepareUndo, map[string]any{"operation_key": r}, approval.CodeInvalidState)

			// list, all and by status.
			all := ok(t, cs, mcpserver.ToolListOperations, map[string]any{})
			if len(all.list.Operations) < 4 || !strings.Contains(all.text, c) {
				t.Errorf("list: %d operations, text %q", len(all.list.Operations), all.text)
			}
			canceled := ok(t, cs, mcpserver.ToolListOperations, map[string]any{"status": "canceled"})
			for _, v := range canceled.list.Operations {
				if v.Status != approval.StatusCanceled {
					t.Errorf("list canceled returned %s", v.Status)
				}
			}
		})
	}
	assertNoSecrets(t, h.secrets(), map[string]string{"wire": h.wire.String(), "logs": h.logs.String()})
	assertClean(t, h)
}

// TestHTTPAuth: a missing or unknown bearer key gets 401 with
// WWW-Authenticate before any MCP processing; a good key gets through.
func TestHTTPAuth(t *testing.T) {
	h := newHarness(t)
	u := h.httpURL(t)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	for _, c := range []struct {
		name, auth string
		status     int
	}{
		{"missing", "", 401},
		{"unknown", "Bearer cs_not_a_key", 401},
		{"empty bearer", "Bearer ", 401},
		{"basic", "Basic " + agentKey, 401},
		{"good", "Bearer " + agentKey, 200},
		{"good, lower-case scheme", "bearer " + agentKey, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", u, strings.NewReader(initialize))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if c.status == 401 {
				if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate = %q", resp.Header.Get("WWW-Authenticate"))
				}
				var e mcpserver.ErrorContent
				if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || e.Error.Code != approval.CodeUnauthenticated {
					t.Errorf("401 body = %s", body)
				}
			}
		})
	}
	// Stateless: no session to GET or DELETE.
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+agentKey)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /mcp = %d, want 405", resp.StatusCode)
	}
	// And the Go client gets through with the key, and not without.
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: u, HTTPClient: h.httpClient("")}, nil); err == nil {
		t.Error("a client without a key connected")
	}
	h.connect(t, viaHTTP, agentKey)
}

// TestLongPoll: wait_seconds returns the unchanged operation after the
// wait, and a long-poll never holds up a shutdown: Service.Close ends it.
func TestLongPoll(t *testing.T) {
	h := newHarness(t)
	for _, tr := range []transport{viaInMemory, viaHTTP, viaREST} {
		t.Run(string(tr), func(t *testing.T) {
			cs := h.connect(t, tr, agentKey)
			key := ok(t, cs, mcpserver.ToolPrepareEmail, emailArgs(nil)).op.OperationKey
			start := time.Now()
			r := ok(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 1})
			if d := time.Since(start); d < 900*time.Millisecond || d > 5*time.Second || r.op.Status != approval.StatusDraft {
				t.Errorf("wait 1 s on an unchanged draft: %s after %s", r.op.Status, d)
			}
		})
	}
	// Shutdown: the service closes while a 30 s long-poll is open.
	cs := h.connect(t, viaHTTP, agentKey)
	key := ok(t, cs, mcpserver.ToolPrepareEmail, emailArgs(nil)).op.OperationKey
	done := make(chan time.Time, 1)
	go func() {
		call(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 30})
		done <- time.Now()
	}()
	time.Sleep(300 * time.Millisecond)
	closed := time.Now()
	h.svc.Close()
	select {
	case at := <-done:
		t.Logf("long-poll ended %s after Service.Close", at.Sub(closed).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("a long-poll outlived Service.Close by 5 s")
	}
}

// TestToolsListWhatCanRun: over HTTP the tools of actions the service
// does not have are not listed (development mode without Slack or HTTP
// targets offers prepare_email only), and the instructions name only the
// tools there are.
func TestToolsListWhatCanRun(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		actions []string
		want    []string
	}{
		{nil, []string{"prepare_email", "prepare_slack_message", "prepare_undo"}}, // the harness's service: email and Slack
		{[]string{"email.send"}, []string{"prepare_email"}},
		{[]string{"http.request"}, []string{"prepare_http_request", "prepare_undo"}},
	} {
		opts := &mcpserver.HTTPOptions{Options: mcpserver.Options{Logger: h.log, Actions: c.actions}}
		srv := httptest.NewServer(mcpserver.NewHTTPHandler(h.svc, opts))
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: h.httpClient(agentKey)}, nil)
		must(t, err)
		lt, err := cs.ListTools(context.Background(), nil)
		must(t, err)
		var prepares []string
		for _, tool := range lt.Tools {
			if strings.HasPrefix(tool.Name, "prepare_") {
				prepares = append(prepares, tool.Name)
			}
		}
		slices.Sort(prepares)
		if !slices.Equal(prepares, c.want) {
			t.Errorf("actions %v: prepare tools %v, want %v", c.actions, prepares, c.want)
		}
		ins := cs.InitializeResult().Instructions
		for _, tool := range []string{"prepare_email", "prepare_slack_message", "prepare_http_request"} {
			if strings.Contains(ins, tool) != slices.Contains(c.want, tool) {
				t.Errorf("actions %v: instructions mention %s: %v\n%s", c.actions, tool, strings.Contains(ins, tool), ins)
			}
		}
		_ = cs.Close()
		srv.Close()
	}
}

// The description of wait_seconds says the range its schema enforces.
func TestWaitSecondsDescriptionMatchesSchema(t *testing.T) {
	h := newHarness(t)
	cs := h.connect(t, viaHTTP, agentKey)
	lt, err := cs.ListTools(context.Background(), nil)
	must(t, err)
	for _, tool := range lt.Tools {
		if tool.Name != mcpserver.ToolGetOperationStatus {
			continue
		}
		raw, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Properties map[string]struct {
				Minimum, Maximum *float64
				Description      string
			}
		}
		must(t, json.Unmarshal(raw, &s))
		w := s.Properties["wait_seconds"]
		if w.Minimum == nil || w.Maximum == nil || *w.Minimum != 0 || *w.Maximum != mcpserver.MaxWaitSeconds {
			t.Fatalf("wait_seconds schema range %v-%v, want 0-30", w.Minimum, w.Maximum)
		}
		rangeText := fmt.Sprintf("(%d-%d)", 0, mcpserver.MaxWaitSeconds)
		if !strings.Contains(w.Description, rangeText) || !strings.Contains(tool.Description, "wait_seconds "+rangeText) {
			t.Errorf("descriptions do not say %s:\n%q\n%q", rangeText, w.Description, tool.Description)
		}
		return
	}
	t.Fatal("no get_operation_status tool")
}

// TestNewestProtocolOverStatelessHTTP: the Go SDK client and /mcp agree on
// the newest revision the SDK supports (stateless HTTP accepts it), and a
// client that asks for an older one gets it.
func TestNewestProtocolOverStatelessHTTP(t *testing.T) {
	h := newHarness(t)
	newest := mcp.SupportedProtocolVersions()[0]
	for _, c := range []struct{ ask, want string }{{"", newest}, {"2025-11-25", "2025-11-25"}, {"2025-06-18", "2025-06-18"}} {
		var opts *mcp.ClientSessionOptions
		if c.ask != "" {
			opts = &mcp.ClientSessionOptions{ProtocolVersion: c.ask}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: h.httpURL(t), HTTPClient: h.httpClient(agentKey)}, opts)
		must(t, err)
		if got := cs.InitializeResult().ProtocolVersion; got != c.want {
			t.Errorf("asking %q: negotiated %q, want %q", c.ask, got, c.want)
		}
		// The tools work at that revision.
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Errorf("asking %q: tools/list: %v", c.ask, err)
		}
		_ = cs.Close()
	}
}
