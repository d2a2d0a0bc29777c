package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/mcpserver"
)

// rpc speaks raw JSON-RPC to an MCP endpoint, as a client of one protocol
// revision would.
type rpc struct {
	t       testing.TB
	url     string
	hc      *http.Client
	version string
	meta    map[string]any // the request _meta of protocol 2026-07-28
	n       int
}

type rpcReply struct {
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

func (c *rpc) call(method string, params map[string]any) rpcReply {
	c.t.Helper()
	c.n++
	if params == nil {
		params = map[string]any{}
	}
	if c.meta != nil {
		params["_meta"] = c.meta
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.n, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", c.version)
	if c.meta != nil { // protocol 2026-07-28 routing headers
		req.Header.Set("Mcp-Method", method)
		for _, n := range []string{"name", "taskId"} {
			if v, ok := params[n].(string); ok {
				req.Header.Set("Mcp-Name", v)
			}
		}
	}
	resp, err := c.hc.Do(req)
	must(c.t, err)
	defer resp.Body.Close()
	var out rpcReply
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		c.t.Fatalf("%s: %d: not JSON-RPC: %v", method, resp.StatusCode, err)
	}
	return out
}

func (c *rpc) ok(method string, params map[string]any) map[string]any {
	c.t.Helper()
	r := c.call(method, params)
	if r.Error != nil {
		c.t.Fatalf("%s: error %d %s", method, r.Error.Code, r.Error.Message)
	}
	return r.Result
}

func (c *rpc) fails(method string, params map[string]any, code int) string {
	c.t.Helper()
	r := c.call(method, params)
	if r.Error == nil || r.Error.Code != code {
		c.t.Fatalf("%s: got %+v %+v, want error %d", method, r.Result, r.Error, code)
	}
	return r.Error.Message
}

// tool calls a tool and returns its structured content.
func (c *rpc) tool(name string, args map[string]any, extra map[string]any) map[string]any {
	c.t.Helper()
	p := map[string]any{"name": name, "arguments": args}
	for k, v := range extra {
		p[k] = v
	}
	return c.ok("tools/call", p)
}

func experimental(t testing.TB, h *harness, url, key string) *rpc {
	return &rpc{t: t, url: url, hc: h.httpClient(key), version: "2025-11-25"}
}

func extension(t testing.TB, h *harness, url, key string, tasks bool) *rpc {
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	return &rpc{t: t, url: url, hc: h.httpClient(key), version: "2026-07-28", meta: map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "0"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}}
}

// prepared is the key of a new draft email.
func prepared(t testing.TB, c *rpc) string {
	t.Helper()
	res := c.tool(mcpserver.ToolPrepareEmail, emailArgs(nil), nil)
	sc, _ := res["structuredContent"].(map[string]any)
	key, _ := sc["operation_key"].(string)
	if !strings.HasPrefix(key, "op_") {
		t.Fatalf("prepare: %v", res)
	}
	return key
}

// until polls tasks/get until the task reaches status.
func until(t testing.TB, c *rpc, key, status string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		res := c.ok("tasks/get", map[string]any{"taskId": key})
		if res["status"] == status {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %v, want %s", key, res["status"], status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replica serves /mcp from a second service on the same store, as
// another replica would.
func (h *harness) replica(t testing.TB) string {
	svc, err := approval.NewService(approval.Config{
		Store: h.store, Policy: h.svc.Policy(), Actions: []approval.Action{h.email, fakeSlack{}},
		Notifiers: map[string]approval.Notifier{"console": h.inbox}, Links: approval.RandomKeyring(),
		PublicURL: "http://countersign.test", Logger: h.log,
	})
	must(t, err)
	t.Cleanup(svc.Close)
	srv := httptest.NewServer(mcpserver.NewHTTPHandler(svc, nil))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestTasksExperimental: the tasks of protocol 2025-11-25 over raw
// JSON-RPC. A send_operation with params.task is a task whose id is the
// operation key, durable before the reply (another replica answers at
// once); an approval completes it with the operation's result; a
// rejection fails it with the reason; tasks/cancel cancels the operation.
func TestTasksExperimental(t *testing.T) {
	h := newHarness(t)
	c := experimental(t, h, h.httpURL(t), agentKey)
	other := experimental(t, h, h.replica(t), agentKey)

	init := c.ok("initialize", map[string]any{"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": "raw", "version": "0"},
		"capabilities": map[string]any{"tasks": map[string]any{"list": map[string]any{}, "cancel": map[string]any{}}}})
	caps, _ := init["capabilities"].(map[string]any)
	if tc, _ := caps["tasks"].(map[string]any); tc == nil || tc["requests"] == nil || tc["cancel"] == nil || tc["list"] == nil {
		t.Errorf("initialize does not declare tasks: %v", caps)
	}
	plain := c.ok("initialize", map[string]any{"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": "raw", "version": "0"},
		"capabilities": map[string]any{}})
	if pc, _ := plain["capabilities"].(map[string]any); pc["tasks"] != nil {
		t.Errorf("tasks declared to a client without the capability: %v", pc)
	}
	tools, _ := c.ok("tools/list", nil)["tools"].([]any)
	for _, tl := range tools {
		m := tl.(map[string]any)
		ex, _ := m["execution"].(map[string]any)
		if want := m["name"] == mcpserver.ToolSendOperation; (ex != nil && ex["taskSupport"] == "optional") != want {
			t.Errorf("%s: execution %v", m["name"], m["execution"])
		}
	}

	// Approved: working, then completed with the operation's result.
	key := prepared(t, c)
	created := c.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": key}, map[string]any{"task": map[string]any{"ttl": 60000}})
	task, _ := created["task"].(map[string]any)
	if task["taskId"] != key || task["status"] != "working" || created["structuredContent"] != nil {
		t.Fatalf("send_operation as a task: %v", created)
	}
	if ttl, _ := task["ttl"].(float64); ttl < float64((time.Hour + approval.DefaultRetention).Milliseconds()) {
		t.Errorf("ttl %v does not cover the approval window and the retention", task["ttl"])
	}
	if got := other.ok("tasks/get", map[string]any{"taskId": key}); got["status"] != "working" || got["createdAt"] != task["createdAt"] {
		t.Errorf("another replica's tasks/get: %v", got)
	}
	h.approve(t, key, true, "")
	until(t, other, key, "completed")
	res := c.ok("tasks/result", map[string]any{"taskId": key})
	sc, _ := res["structuredContent"].(map[string]any)
	meta, _ := res["_meta"].(map[string]any)
	if res["isError"] == true || sc["status"] != "succeeded" || sc["result"] == nil ||
		meta["io.modelcontextprotocol/related-task"].(map[string]any)["taskId"] != key {
		t.Errorf("tasks/result: %v", res)
	}
	if list, _ := c.ok("tasks/list", nil)["tasks"].([]any); len(list) != 1 || list[0].(map[string]any)["taskId"] != key {
		t.Errorf("tasks/list: %v", list)
	}

	// Rejected: failed, with the approver's reason.
	key = prepared(t, c)
	c.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": key}, map[string]any{"task": map[string]any{}})
	h.approve(t, key, false, "not this week")
	got := until(t, c, key, "failed")
	if msg, _ := got["statusMessage"].(string); !strings.Contains(msg, "not this week") {
		t.Errorf("failed task without the reason: %v", got)
	}
	res = c.ok("tasks/result", map[string]any{"taskId": key})
	if sc, _ := res["structuredContent"].(map[string]any); res["isError"] != true || sc["status"] != "rejected" {
		t.Errorf("tasks/result of a rejection: %v", res)
	}

	// Cancelled: the operation is canceled; a second cancel is refused.
	key = prepared(t, c)
	c.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": key}, map[string]any{"task": map[string]any{}})
	if got := other.ok("tasks/cancel", map[string]any{"taskId": key}); got["status"] != "cancelled" {
		t.Errorf("tasks/cancel: %v", got)
	}
	until(t, c, key, "cancelled")
	if op, err := h.svc.Get(context.Background(), h.agent, key); err != nil || op.Status != approval.StatusCanceled {
		t.Errorf("after tasks/cancel the operation is %v (%v)", op.Status, err)
	}
	c.fails("tasks/cancel", map[string]any{"taskId": key}, -32602)

	// Not a task: unknown, another principal's, a draft; a task asked of
	// a tool that does not run as one.
	c.fails("tasks/get", map[string]any{"taskId": "op_AAAAAAAAAAAAAAAAAAAAAAAAAA"}, -32602)
	experimental(t, h, h.httpURL(t), narrowKey).fails("tasks/get", map[string]any{"taskId": key}, -32602)
	draft := prepared(t, c)
	c.fails("tasks/get", map[string]any{"taskId": draft}, -32602)
	c.fails("tools/call", map[string]any{"name": mcpserver.ToolPrepareEmail, "arguments": emailArgs(nil), "task": map[string]any{}}, -32601)
	c.fails("tools/call", map[string]any{"name": mcpserver.ToolSendOperation,
		"arguments": map[string]any{"operation_key": "op_AAAAAAAAAAAAAAAAAAAAAAAAAA"}, "task": map[string]any{}}, -32602)

	// Without params.task, send_operation answers as it always did.
	sent := c.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": draft}, nil)
	if sc, _ := sent["structuredContent"].(map[string]any); sent["task"] != nil || sc["status"] != "pending_approval" {
		t.Errorf("send_operation without a task: %v", sent)
	}
	assertNoSecrets(t, h.secrets(), map[string]string{"wire": h.wire.String(), "logs": h.logs.String()})
}

// TestTasksExtension: the tasks extension of protocol 2026-07-28. Only a
// request that declares the extension gets a task; every ending but a
// cancellation is completed, with the tool result inlined (isError where
// it did not run); tasks/cancel is an acknowledgement.
func TestTasksExtension(t *testing.T) {
	h := newHarness(t)
	c := extension(t, h, h.httpURL(t), agentKey, true)
	without := extension(t, h, h.httpURL(t), agentKey, false)

	caps, _ := c.ok("server/discover", nil)["capabilities"].(map[string]any)
	if ext, _ := caps["extensions"].(map[string]any); ext["io.modelcontextprotocol/tasks"] == nil {
		t.Errorf("server/discover does not declare the tasks extension: %v", caps)
	}

	key := prepared(t, c)
	created := c.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": key}, nil)
	if created["resultType"] != "task" || created["taskId"] != key || created["status"] != "working" || created["ttlMs"] == nil {
		t.Fatalf("send_operation with the extension: %v", created)
	}
	without.fails("tasks/get", map[string]any{"taskId": key}, -32021)
	if got := c.ok("tasks/get", map[string]any{"taskId": key}); got["resultType"] != "complete" || got["status"] != "working" || got["result"] != nil {
		t.Errorf("tasks/get: %v", got)
	}
	h.approve(t, key, true, "")
	got := until(t, c, key, "completed")
	res, _ := got["result"].(map[string]any)
	if sc, _ := res["structuredContent"].(map[string]any); res["isError"] == true || sc["status"] != "succeeded" {
		t.Errorf("completed task: %v", got)
	}

	key = prepared(t, c)
	c.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": key}, nil)
	h.approve(t, key, false, "wrong client")
	got = until(t, c, key, "completed")
	res, _ = got["result"].(map[string]any)
	if sc, _ := res["structuredContent"].(map[string]any); res["isError"] != true || sc["status"] != "rejected" ||
		!strings.Contains(got["statusMessage"].(string), "wrong client") {
		t.Errorf("rejected task: %v", got)
	}

	key = prepared(t, c)
	c.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": key}, nil)
	if ack := c.ok("tasks/cancel", map[string]any{"taskId": key}); ack["resultType"] != "complete" || ack["status"] != nil {
		t.Errorf("tasks/cancel: %v", ack)
	}
	until(t, c, key, "cancelled")
	c.fails("tasks/get", map[string]any{"taskId": "op_AAAAAAAAAAAAAAAAAAAAAAAAAA"}, -32602)

	// Without the extension in the request, no task.
	key = prepared(t, without)
	sent := without.tool(mcpserver.ToolSendOperation, map[string]any{"operation_key": key}, nil)
	if sc, _ := sent["structuredContent"].(map[string]any); sent["resultType"] == "task" || sc["status"] != "pending_approval" {
		t.Errorf("send_operation without the extension: %v", sent)
	}
	assertNoSecrets(t, h.secrets(), map[string]string{"wire": h.wire.String(), "logs": h.logs.String()})
}

// TestTasksOverStdio: countersign mcp's transport answers tasks itself,
// over the REST API: the task started through the bridge is followed,
// completed and cancelled from the operation in the service's store.
func TestTasksOverStdio(t *testing.T) {
	h := newHarness(t)
	rc, err := client.New(h.restURL(t), agentKey, nil)
	must(t, err)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := mcpserver.NewServer(rc, &mcpserver.Options{Logger: h.log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, mcpserver.StdioTransport(rc, inR, outW, h.log)) }()
	t.Cleanup(func() { cancel(); _ = inW.Close(); <-done })
	lines := bufio.NewScanner(outR)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	call := func(method string, params map[string]any) rpcReply {
		t.Helper()
		n++
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": n, "method": method, "params": params})
		_, err := inW.Write(append(b, '\n'))
		must(t, err)
		for lines.Scan() {
			h.wire.Write(append(lines.Bytes(), '\n'))
			var r struct {
				ID any `json:"id"`
				rpcReply
			}
			must(t, json.Unmarshal(lines.Bytes(), &r))
			if r.ID == float64(n) {
				return r.rpcReply
			}
		}
		t.Fatalf("%s: no answer: %v", method, lines.Err())
		return rpcReply{}
	}
	ok := func(method string, params map[string]any) map[string]any {
		t.Helper()
		r := call(method, params)
		if r.Error != nil {
			t.Fatalf("%s: %+v", method, r.Error)
		}
		return r.Result
	}
	init := ok("initialize", map[string]any{"protocolVersion": "2025-11-25", "clientInfo": map[string]any{"name": "raw", "version": "0"},
		"capabilities": map[string]any{"tasks": map[string]any{}}})
	if caps, _ := init["capabilities"].(map[string]any); caps["tasks"] == nil {
		t.Errorf("initialize over stdio does not declare tasks: %v", init)
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	_, _ = inW.Write(append(b, '\n'))

	send := func() string {
		res := ok("tools/call", map[string]any{"name": mcpserver.ToolPrepareEmail, "arguments": emailArgs(nil)})
		key := res["structuredContent"].(map[string]any)["operation_key"].(string)
		res = ok("tools/call", map[string]any{"name": mcpserver.ToolSendOperation, "arguments": map[string]any{"operation_key": key}, "task": map[string]any{}})
		if task, _ := res["task"].(map[string]any); task["taskId"] != key || task["status"] != "working" {
			t.Fatalf("send_operation as a task over stdio: %v", res)
		}
		return key
	}
	key := send()
	h.approve(t, key, true, "")
	res := ok("tasks/result", map[string]any{"taskId": key}) // waits for the end
	if sc, _ := res["structuredContent"].(map[string]any); res["isError"] == true || sc["status"] != "succeeded" {
		t.Errorf("tasks/result over stdio: %v", res)
	}
	if got := ok("tasks/get", map[string]any{"taskId": key}); got["status"] != "completed" {
		t.Errorf("tasks/get over stdio: %v", got)
	}
	key = send()
	if got := ok("tasks/cancel", map[string]any{"taskId": key}); got["status"] != "cancelled" {
		t.Errorf("tasks/cancel over stdio: %v", got)
	}
	if r := call("tasks/get", map[string]any{"taskId": "op_AAAAAAAAAAAAAAAAAAAAAAAAAA"}); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("unknown task over stdio: %+v", r)
	}
	assertNoSecrets(t, h.secrets(), map[string]string{"wire": h.wire.String(), "logs": h.logs.String()})
}
