package mcpserver

// MCP tasks (SPEC §13), built at the JSON-RPC layer because the Go SDK
// has none: a send_operation that a client asks to run as a task answers
// with a task whose id is the operation key, and tasks/get, tasks/result,
// tasks/list, tasks/cancel and tasks/update are answered here, from the
// operation itself. Nothing is kept in the process: the operation is in
// the store before the reply, so any replica (or the stdio bridge, over
// REST) answers for any task, and /mcp stays stateless.
//
// Two flavours are spoken:
//   - the experimental tasks of protocol 2025-11-25 (TypeScript SDK 1.32,
//     VS Code): the client asks with params.task on tools/call; a
//     rejection, expiry or failure is a "failed" task (its rules count a
//     tool result with isError as failed), and tasks/result returns the
//     tool result;
//   - the tasks extension of protocol 2026-07-28
//     (io.modelcontextprotocol/tasks): the client declares the extension
//     in the request's own capabilities; every ending but cancellation is
//     "completed" with the tool result inlined, isError where it did not
//     run.
//
// A task never carries a link: its fields are built from the agent's view
// of the operation, which holds no capability.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/jsonx"
	"github.com/countersign/countersign/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaRelatedTask     = "io.modelcontextprotocol/related-task"
	extTasks            = "io.modelcontextprotocol/tasks"
	// protocolMRTR is the first revision with per-request capabilities,
	// multi round-trip results and the tasks extension.
	protocolMRTR = "2026-07-28"
)

// JSON-RPC error codes the task layer answers with.
const (
	rpcMethodNotFound   = -32601
	rpcInvalidParams    = -32602
	rpcInternal         = -32603
	rpcMissingClientCap = -32021
)

// taskPollInterval is what a client is asked to wait between tasks/get.
const taskPollInterval = 2 * time.Second

// taskResultLimit bounds how long one tasks/result waits for the end.
const taskResultLimit = time.Hour

type flavor int

const (
	flavorNone         flavor = iota
	flavorExperimental        // protocol 2025-11-25, params.task
	flavorExtension           // protocol 2026-07-28, io.modelcontextprotocol/tasks
)

// taskLayer answers the task methods and turns send_operation into a task
// where the client asks for one. Its zero value speaks tasks without URL
// elicitation.
type taskLayer struct {
	// retention is how long a finished operation stays readable (the
	// task's time to live adds it to the approval window).
	retention time.Duration
	// elicit, when set, asks the principal's own human to open the inbox
	// page of the operation (URL elicitation; /mcp only).
	elicit *elicitor
	// log, when set, gets one line per task method call.
	log *slog.Logger
}

// exchange is what to do with one client message: answer it here
// (answer, when set, runs first; a nil answer goes on to forward), or
// forward it (possibly rewritten) to the SDK's server and pass its
// response through rewrite (when set).
type exchange struct {
	answer  func(ctx context.Context) []byte
	forward []byte
	rewrite func(resp rpcMsg) rpcMsg
}

// handle plans one client message. b is the caller's backend; p the
// caller where known (on /mcp), for URL elicitation; version the
// negotiated protocol version where the transport knows it.
func (t *taskLayer) handle(b Backend, p *approval.Principal, raw []byte, version string) exchange {
	var m rpcMsg
	if err := json.Unmarshal(raw, &m); err != nil || m.Method == "" || len(m.ID) == 0 {
		return exchange{forward: raw} // responses, notifications, garbage: the SDK's
	}
	var meta reqMeta
	_ = json.Unmarshal(m.Params, &meta)
	version = meta.version(version)
	caps := meta.caps()
	switch m.Method {
	case "initialize":
		var ip struct {
			Capabilities struct {
				Tasks json.RawMessage `json:"tasks"`
			} `json:"capabilities"`
		}
		_ = json.Unmarshal(m.Params, &ip)
		if ip.Capabilities.Tasks == nil {
			return exchange{forward: raw}
		}
		return exchange{forward: raw, rewrite: patchResult(declareTasks)}
	case "server/discover":
		return exchange{forward: raw, rewrite: patchResult(declareTasksExtension)}
	case "tools/list":
		return exchange{forward: raw, rewrite: patchResult(func(res map[string]any) {
			markTaskTools(res)
			appendGatewayTools(b)(res)
		})}
	case "tools/call":
		return t.toolsCall(b, p, m, raw, caps)
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update":
		fl := flavorExperimental
		if caps.tasks() || version >= protocolMRTR {
			fl = flavorExtension
		}
		return exchange{answer: func(ctx context.Context) []byte {
			if fl == flavorExtension && !caps.tasks() {
				return reply(m.ID, nil, &rpcErr{Code: rpcMissingClientCap, Message: "Missing required client capability",
					Data: map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}}})
			}
			start := time.Now()
			res, err := t.taskMethod(ctx, b, fl, m)
			if t.log != nil {
				var tp taskParams
				_ = json.Unmarshal(m.Params, &tp)
				attrs := []any{"method", m.Method, "task", tp.TaskID, "duration_ms", time.Since(start).Milliseconds()}
				if err != nil {
					attrs = append(attrs, "rpc_error", err.Code)
				}
				t.log.Info("mcp task call", attrs...)
			}
			return reply(m.ID, res, err)
		}}
	}
	return exchange{forward: raw}
}

// declareTasks adds the 2025-11-25 server capability: task-augmented
// tools/call, tasks/list and tasks/cancel.
func declareTasks(res map[string]any) {
	child(res, "capabilities")["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
		"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
}

// declareTasksExtension adds the tasks extension to server/discover.
func declareTasksExtension(res map[string]any) {
	child(child(res, "capabilities"), "extensions")[extTasks] = map[string]any{}
}

// markTaskTools says which tools may run as a task (2025-11-25): those
// that wait for a human. A client that was not told the server does tasks
// ignores it.
func markTaskTools(res map[string]any) {
	tools, _ := res["tools"].([]any)
	for _, tl := range tools {
		if m, ok := tl.(map[string]any); ok && m["name"] == ToolSendOperation {
			m["execution"] = map[string]any{"taskSupport": "optional"}
		}
	}
}

type callParams struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments"`
	Task           json.RawMessage            `json:"task"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   string                     `json:"requestState"`
}

// toolsCall plans a tools/call: send_operation becomes a task where the
// client asked for one, and may first ask the principal's human to open
// the operation's inbox page (URL elicitation). Other tools run as today.
func (t *taskLayer) toolsCall(b Backend, p *approval.Principal, m rpcMsg, raw []byte, caps clientCaps) exchange {
	var cp callParams
	if json.Unmarshal(m.Params, &cp) != nil {
		return exchange{forward: raw}
	}
	fl := flavorNone
	switch {
	case caps.tasks():
		fl = flavorExtension
	case len(cp.Task) > 0 && string(cp.Task) != "null":
		fl = flavorExperimental
	}
	if _, _, ok := gateway.Split(cp.Name); ok {
		return t.gatewayCall(b, m, cp, fl)
	}
	if cp.Name != ToolSendOperation {
		if fl == flavorExperimental { // 2025-11-25: a tool without taskSupport
			return answerNow(m.ID, nil, &rpcErr{Code: rpcMethodNotFound,
				Message: "tool " + cp.Name + " does not run as a task: call it without params.task (only send_operation does)"})
		}
		return exchange{forward: raw}
	}
	var args struct {
		OperationKey string `json:"operation_key"`
	}
	_ = json.Unmarshal(cp.Arguments, &args)
	elicit := t.elicit != nil && p != nil && p.OnBehalfOf != "" && caps.urlElicit()
	if cp.RequestState != "" {
		if t.elicit == nil || p == nil {
			return answerNow(m.ID, nil, &rpcErr{Code: rpcInvalidParams, Message: "requestState is not valid here: call send_operation without it"})
		}
		return exchange{answer: func(ctx context.Context) []byte {
			if err := t.elicit.redeem(ctx, p, cp.Name, args.OperationKey, cp.RequestState); err != nil {
				return reply(m.ID, nil, err)
			}
			// The human was asked; what they accepted approved nothing.
			// Answer as a plain call would (or with the task), never again
			// with the same question.
			return nil
		}, forward: stripParams(m, "task", "inputResponses", "requestState"), rewrite: t.sendRewrite(fl, nil, "", args.OperationKey)}
	}
	if fl == flavorNone && !elicit {
		return exchange{forward: raw}
	}
	var ask *approval.Principal
	if elicit {
		ask = p
	}
	return exchange{forward: stripParams(m, "task", "inputResponses", "requestState"), rewrite: t.sendRewrite(fl, ask, cp.Name, args.OperationKey)}
}

// toolResult is what the task layer reads of a CallToolResult.
type toolResult struct {
	IsError           bool            `json:"isError"`
	Content           []any           `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
}

// sendRewrite turns send_operation's result into a task (fl), or into a
// request to open the inbox page (ask: the principal whose human is
// asked).
func (t *taskLayer) sendRewrite(fl flavor, ask *approval.Principal, tool, key string) func(rpcMsg) rpcMsg {
	return func(resp rpcMsg) rpcMsg {
		if resp.Error != nil || len(resp.Result) == 0 {
			return resp
		}
		var tr toolResult
		if json.Unmarshal(resp.Result, &tr) != nil {
			return resp
		}
		if tr.IsError {
			// Nothing was sent: there is no task to follow. The 2025-11-25
			// client expects a task or a JSON-RPC error; the extension's
			// takes the tool result.
			if fl == flavorExperimental {
				var ec ErrorContent
				_ = json.Unmarshal(tr.StructuredContent, &ec)
				msg := "send_operation failed"
				if ec.Error != nil {
					msg = errorText(ec.Error)
				}
				resp.Result, resp.Error = nil, &rpcErr{Code: rpcInvalidParams, Message: msg, Data: ec}
			}
			return resp
		}
		var v approval.View
		if json.Unmarshal(tr.StructuredContent, &v) != nil || v.OperationKey == "" {
			return resp
		}
		if ask != nil && v.Status == approval.StatusPending && slices.Contains(v.Approval.Approvers, ask.OnBehalfOf) {
			if res, err := t.elicit.ask(ask, tool, v); err == nil {
				resp.Result = res
				return resp
			}
		}
		switch fl {
		case flavorExperimental:
			resp.Result, _ = jsonx.Marshal(map[string]any{"task": t.task(v, fl, false),
				"_meta": map[string]any{"io.modelcontextprotocol/model-immediate-response": sendText(v)}})
		case flavorExtension:
			task := t.task(v, fl, false)
			task.ResultType = "task"
			resp.Result, _ = jsonx.Marshal(task)
		}
		return resp
	}
}

// wireTask is a task in either flavour (ttl/pollInterval in 2025-11-25,
// ttlMs/pollIntervalMs and an inlined result in the extension).
type wireTask struct {
	ResultType     string          `json:"resultType,omitempty"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTL            *int64          `json:"ttl,omitempty"`
	TTLMs          *int64          `json:"ttlMs,omitempty"`
	PollInterval   *int64          `json:"pollInterval,omitempty"`
	PollIntervalMs *int64          `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
}

// Task statuses.
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// taskStatus maps the operation's status: waiting or running is working;
// succeeded is completed; canceled is cancelled; any other ending is
// failed in 2025-11-25 and completed (with isError) in the extension.
func taskStatus(s approval.Status, fl flavor) string {
	switch {
	case !s.Terminal():
		return taskWorking
	case s == approval.StatusSucceeded:
		return taskCompleted
	case s == approval.StatusCanceled:
		return taskCancelled
	case fl == flavorExperimental:
		return taskFailed
	}
	return taskCompleted
}

// statusMessage says in a line where the operation stands. It may reach
// the model: it is built from the agent's view, never with a link.
func statusMessage(v approval.View) string {
	switch v.Status {
	case approval.StatusPending:
		need := max(v.Approval.Required-len(v.Approval.Approvals), 1)
		return fmt.Sprintf("Waiting for %d human approval(s); nobody can approve it from here.", need)
	case approval.StatusApproved:
		return "Approved by a human; countersign is carrying it out."
	case approval.StatusExecuting:
		return "Approved and running now."
	case approval.StatusSucceeded:
		return "Done: it ran once, exactly as approved."
	case approval.StatusRejected:
		if r := v.Approval.Rejection; r != nil {
			if reason := oneLine(r.Reason, 300); reason != "" {
				return "Rejected by " + r.Approver + ": " + reason
			}
			return "Rejected by " + r.Approver + " (no reason given)."
		}
		return "Rejected."
	case approval.StatusExpired:
		return "Expired: nobody approved it in time. Nothing was done."
	case approval.StatusCanceled:
		return "Canceled. Nothing was done."
	case approval.StatusFailed:
		if v.Error != nil {
			return fmt.Sprintf("Failed with %s: %s", v.Error.Code, oneLine(v.Error.Message, 300))
		}
		return "Failed."
	case approval.StatusSuperseded:
		return "Replaced by an approver's edit: follow " + v.SupersededBy + "."
	}
	return string(v.Status)
}

// task is the operation as a task; with result, a finished one carries
// its tool result (the extension's tasks/get).
func (t *taskLayer) task(v approval.View, fl flavor, result bool) wireTask {
	retention := t.retention
	if retention <= 0 {
		retention = approval.DefaultRetention
	}
	ttl := (v.ExpiresAt.Sub(v.CreatedAt) + retention).Milliseconds()
	poll := taskPollInterval.Milliseconds()
	w := wireTask{TaskID: v.OperationKey, Status: taskStatus(v.Status, fl), StatusMessage: statusMessage(v),
		CreatedAt: v.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: lastUpdated(v).UTC().Format(time.RFC3339Nano)}
	if fl == flavorExtension {
		w.TTLMs, w.PollIntervalMs = &ttl, &poll
		if result && v.Status.Terminal() && w.Status == taskCompleted {
			w.Result = finalResult(v, "")
		}
	} else {
		w.TTL, w.PollInterval = &ttl, &poll
	}
	return w
}

// lastUpdated is the latest moment the view records.
func lastUpdated(v approval.View) time.Time {
	last := v.CreatedAt
	for _, a := range v.Approval.Approvals {
		if a.At.After(last) {
			last = a.At
		}
	}
	if r := v.Approval.Rejection; r != nil && r.At.After(last) {
		last = r.At
	}
	if v.Status == approval.StatusExpired && v.ExpiresAt.After(last) {
		last = v.ExpiresAt
	}
	return last
}

// finalResult is the tool result of a finished task: the operation and
// what happened, as get_operation_status would say it; isError unless it
// succeeded. taskID, when set, ties it to its task (tasks/result).
func finalResult(v approval.View, taskID string) json.RawMessage {
	res, err := okResult(viewResult(v, statusText(v, 0)))
	if err != nil {
		return nil
	}
	if up := upstreamResult(v); up != nil {
		res = up // a gateway call: the upstream's own result
	}
	res.IsError = v.Status != approval.StatusSucceeded
	if taskID != "" {
		res.Meta = map[string]any{metaRelatedTask: map[string]any{"taskId": taskID}}
	}
	b, _ := json.Marshal(res)
	return b
}

// upstreamResult is the tool result of a finished gateway call that
// reached the upstream (mcp.call, succeeded or failed with the tool's own
// error): the upstream's content and structured content, as a client that
// called the tool directly would have got them. nil for anything else.
func upstreamResult(v approval.View) *mcp.CallToolResult {
	if v.Action != mcpcall.Name || len(v.Result) == 0 {
		return nil
	}
	var r mcpcall.Result
	if json.Unmarshal(v.Result, &r) != nil {
		return nil
	}
	raw, err := jsonx.Marshal(map[string]any{"content": r.Content, "structuredContent": r.StructuredContent, "isError": r.IsError})
	if err != nil {
		return nil
	}
	res := &mcp.CallToolResult{}
	if json.Unmarshal(raw, res) != nil {
		return nil
	}
	return res
}
