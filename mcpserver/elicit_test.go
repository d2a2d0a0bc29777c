package mcpserver_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/mcpserver"
)

// TestURLElicitation: protocol 2026-07-28's stateless input_required, over
// raw JSON-RPC (no client available here speaks it yet). A client that
// can open URLs, sending for a principal whose own human approves, is
// asked to open the inbox page of that one operation; the operation is
// pending already, and the URL is no capability. The retry with the
// client's accept approves nothing: it answers as send_operation does
// (or with the task). requestState is bound to the principal, the call
// and an expiry, cannot be forged, and is redeemed once.
func TestURLElicitation(t *testing.T) {
	h := newHarness(t)
	h.agent.OnBehalfOf = "grace" // the agent works for grace, who approves
	var now atomic.Int64
	now.Store(time.Now().Unix())
	srv := httptest.NewServer(mcpserver.NewHTTPHandler(h.svc, &mcpserver.HTTPOptions{Options: mcpserver.Options{Logger: h.log}, Elicitation: &mcpserver.Elicitation{
		InboxURL: func(key string) string { return "https://countersign.test/inbox/" + key },
		MAC:      func(parts ...string) string { return h.svc.Links().MAC("mcp-request-state", parts...) },
		Once:     h.store.Once,
		Now:      func() time.Time { return time.Unix(now.Load(), 0) },
	}}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/mcp"
	withURL := func(key string, tasks bool) *rpc {
		c := extension(t, h, url, key, tasks)
		c.meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any)["elicitation"] = map[string]any{"url": map[string]any{}}
		return c
	}
	c := withURL(agentKey, false)

	ask := func(c *rpc) (key, state string) {
		t.Helper()
		key = prepared(t, c)
		res := c.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": key}, nil)
		reqs, _ := res["inputRequests"].(map[string]any)
		in, _ := reqs["open_inbox"].(map[string]any)
		params, _ := in["params"].(map[string]any)
		state, _ = res["requestState"].(string)
		if res["resultType"] != "input_required" || in["method"] != "elicitation/create" || params["mode"] != "url" ||
			params["url"] != "https://countersign.test/inbox/"+key || state == "" || res["structuredContent"] != nil {
			t.Fatalf("send_operation with URL elicitation: %v", res)
		}
		if msg, _ := params["message"].(string); !strings.Contains(msg, "approves nothing") {
			t.Errorf("the message does not say that accepting approves nothing: %q", msg)
		}
		if op, err := h.svc.Get(context.Background(), h.agent, key); err != nil || op.Status != approval.StatusPending {
			t.Fatalf("the operation is not pending before the question: %v %v", op.Status, err)
		}
		return key, state
	}
	retry := func(c *rpc, key, state string) rpcReply {
		return c.call("tools/call", map[string]any{"name": mcpserver.ToolSendOperation, "arguments": map[string]any{"operation_key": key},
			"inputResponses": map[string]any{"open_inbox": map[string]any{"action": "accept"}}, "requestState": state})
	}

	key, state := ask(c)
	r := retry(c, key, state)
	sc, _ := r.Result["structuredContent"].(map[string]any)
	if r.Error != nil || sc["status"] != "pending_approval" || r.Result["resultType"] == "input_required" {
		t.Fatalf("the retry after accept: %+v %+v", r.Result, r.Error)
	}
	if op, _ := h.svc.Get(context.Background(), h.agent, key); op.Status != approval.StatusPending ||
		len(approval.AgentView(op, h.svc.Now()).Approval.Approvals) != 0 {
		t.Errorf("accepting changed the operation: %s, %+v", op.Status, approval.AgentView(op, h.svc.Now()).Approval)
	}
	if r := retry(c, key, state); r.Error == nil || !strings.Contains(r.Error.Message, "already used") {
		t.Errorf("a requestState used twice: %+v", r)
	}

	// Forged, another principal's, another call's, expired.
	key, state = ask(c)
	if r := retry(c, key, state[:len(state)-2]+"xx"); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("a tampered requestState: %+v", r)
	}
	if r := retry(withURL(narrowKey, false), key, state); r.Error == nil || !strings.Contains(r.Error.Message, "another principal") {
		t.Errorf("another principal's requestState: %+v", r)
	}
	other, _ := ask(c)
	if r := retry(c, other, state); r.Error == nil || !strings.Contains(r.Error.Message, "another call") {
		t.Errorf("another call's requestState: %+v", r)
	}
	now.Add(int64(time.Hour / time.Second))
	if r := retry(c, key, state); r.Error == nil || !strings.Contains(r.Error.Message, "expired") {
		t.Errorf("an expired requestState: %+v", r)
	}
	now.Store(time.Now().Unix())

	// With the tasks extension too: the question first, then the task.
	ct := withURL(agentKey, true)
	key, state = ask(ct)
	if r := retry(ct, key, state); r.Error != nil || r.Result["resultType"] != "task" || r.Result["taskId"] != key {
		t.Errorf("the retry with the tasks extension: %+v %+v", r.Result, r.Error)
	}

	// A client that cannot open URLs is not asked.
	plain := extension(t, h, url, agentKey, false)
	key = prepared(t, plain)
	res := plain.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": key}, nil)
	if sc, _ := res["structuredContent"].(map[string]any); res["resultType"] == "input_required" || sc["status"] != "pending_approval" {
		t.Errorf("without elicitation.url: %v", res)
	}
	// Once the human decided on the page, the operation runs as ever.
	h.approve(t, key, true, "")

	// Nor is a principal whose human is not among the approvers.
	h.agent.OnBehalfOf = "sam"
	key = prepared(t, c)
	res = c.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": key}, nil)
	if sc, _ := res["structuredContent"].(map[string]any); res["resultType"] == "input_required" || sc["status"] != "pending_approval" {
		t.Errorf("for a human who does not approve: %v", res)
	}
	assertNoSecrets(t, h.secrets(), map[string]string{"wire": h.wire.String(), "logs": h.logs.String()})
}
