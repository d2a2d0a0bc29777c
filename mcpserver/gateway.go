package mcpserver

// The gateway's tools (SPEC §12) on /mcp and the stdio bridge: the task
// layer appends the upstream tools a principal may call to tools/list, and
// answers their tools/call itself, through the backend (the gateway in
// process, or POST /v1/tools/call over REST), so that both transports
// serve them alike and a guarded call can become a task.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/jsonx"
	"github.com/countersign/countersign/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// GatewayResult is the tools/call result of a gateway call: a pass tool's
// result as the upstream gave it (bounded), or a guarded call's operation
// with the words that tell the model a human must approve it first.
func GatewayResult(o gateway.Outcome) (json.RawMessage, error) {
	if o.Operation != nil {
		res, err := okResult(viewResult(*o.Operation, guardedText(o.Tool, *o.Operation)))
		if err != nil {
			return nil, err
		}
		return jsonx.Marshal(res)
	}
	r := o.Passed
	out := map[string]any{"content": r.Content}
	if len(r.Content) == 0 {
		out["content"] = []any{}
	}
	if len(r.Structured) > 0 {
		out["structuredContent"] = r.Structured
	}
	if r.IsError {
		out["isError"] = true
	}
	return jsonx.Marshal(out)
}

// guardedText tells the model what happened to its call: nothing ran, a
// human decides, and how to follow it.
func guardedText(tool string, v approval.View) string {
	if v.Status != approval.StatusPending {
		return statusText(v, 0)
	}
	return fmt.Sprintf("Nothing has run yet: a human must approve this call of %s first. It is operation %s, sent for approval.\n%s",
		tool, v.OperationKey, guidance(v))
}

// ToolErrorResult is the tools/call result of a refused call: isError with
// the contract's error in text and structured content.
func ToolErrorResult(e *approval.Error) json.RawMessage {
	data, _ := jsonx.Marshal(ErrorContent{Error: e})
	b, _ := jsonx.Marshal(map[string]any{"isError": true,
		"content":           []any{map[string]any{"type": "text", "text": errorText(e)}},
		"structuredContent": json.RawMessage(data)})
	return b
}

// GatewayTools implements Backend.
func (l *Local) GatewayTools(ctx context.Context) ([]*mcp.Tool, error) {
	if l.Gateway == nil || l.Principal == nil {
		return nil, nil
	}
	return l.Gateway.Tools(l.Principal), nil
}

// CallGateway implements Backend.
func (l *Local) CallGateway(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	if l.Gateway == nil {
		return nil, approval.Errorf(approval.CodeNotFound, "no tool %q here", name)
	}
	o, err := l.Gateway.Call(ctx, l.Principal, name, args)
	if err != nil {
		return nil, err
	}
	return GatewayResult(o)
}

// gatewayListTimeout bounds the backend's answer for the tools/list rewrite.
const gatewayListTimeout = 5 * time.Second

// appendGatewayTools adds the principal's upstream tools to the last page
// of tools/list; guarded ones may run as a task (2025-11-25).
func appendGatewayTools(b Backend) func(map[string]any) {
	return func(res map[string]any) {
		if c, _ := res["nextCursor"].(string); c != "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), gatewayListTimeout)
		defer cancel()
		tools, err := b.GatewayTools(ctx)
		if err != nil || len(tools) == 0 {
			return
		}
		list, _ := res["tools"].([]any)
		for _, t := range tools {
			raw, err := json.Marshal(t)
			if err != nil {
				continue
			}
			var m map[string]any
			if json.Unmarshal(raw, &m) != nil {
				continue
			}
			if strings.HasPrefix(t.Description, gateway.Guarded) {
				m["execution"] = map[string]any{"taskSupport": "optional"}
			}
			list = append(list, m)
		}
		res["tools"] = list
	}
}

// gatewayCall answers a tools/call of an upstream tool: the backend calls
// it; a guarded call's operation becomes a task where the client asked
// for one (fl).
func (t *taskLayer) gatewayCall(b Backend, m rpcMsg, cp callParams, fl flavor) exchange {
	return exchange{answer: func(ctx context.Context) []byte {
		ctx, cancel := context.WithTimeout(ctx, CallTimeout+targetTimeout)
		defer cancel()
		start := time.Now()
		raw, err := b.CallGateway(ctx, cp.Name, cp.Arguments)
		if t.log != nil {
			attrs := []any{"tool", cp.Name, "duration_ms", time.Since(start).Milliseconds()}
			if e, ok := err.(*approval.Error); ok {
				attrs = append(attrs, "error", e.Code)
			}
			t.log.Info("mcp gateway call", attrs...)
		}
		if err != nil {
			e, ok := err.(*approval.Error)
			if !ok {
				if t.log != nil {
					t.log.Error("mcp gateway call failed", "tool", cp.Name, "err", err)
				}
				e = approval.Errorf(approval.CodeInternal, "internal error; it has been logged")
			}
			raw = ToolErrorResult(e)
		}
		resp := rpcMsg{JSONRPC: "2.0", ID: m.ID, Result: raw}
		var tr toolResult
		if fl != flavorNone && json.Unmarshal(raw, &tr) == nil && !tr.IsError {
			var v approval.View
			if json.Unmarshal(tr.StructuredContent, &v) != nil || v.OperationKey == "" {
				// A pass tool ran at once: there is no task to follow.
				if fl == flavorExperimental {
					return reply(m.ID, nil, &rpcErr{Code: rpcMethodNotFound,
						Message: "tool " + cp.Name + " runs at once, not as a task: call it without params.task"})
				}
				return mustJSON(resp)
			}
		}
		if fl != flavorNone {
			resp = t.sendRewrite(fl, nil, cp.Name, "")(resp)
		}
		out, _ := jsonx.Marshal(resp)
		return out
	}}
}
