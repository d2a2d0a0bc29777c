// Package gateway stands countersign in front of upstream MCP servers
// (SPEC §12): it offers each principal the tools of the upstreams its
// scopes name, as NAME__TOOL; a pass tool runs at once (bounded, rate
// limited, audited as passed); every other tool becomes an mcp.call
// operation, prepared and sent in one step, that a human approves out of
// band. The MCP server (/mcp, the stdio bridge) and the REST API
// (GET /v1/tools, POST /v1/tools/call) both call it.
package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Separator joins an upstream's name and its tool's: NAME__TOOL. Upstream
// names hold no underscore, so the first one splits it.
const Separator = "__"

// Pool is what the gateway needs of the upstreams (*upstream.Pool).
type Pool interface {
	Names() []string
	Spec(name string) (upstream.Spec, bool)
	Tools(name string) ([]upstream.Tool, error)
	Lookup(name, tool string) (upstream.Tool, bool, error)
	Call(ctx context.Context, name, tool string, args json.RawMessage, meta map[string]any) (*upstream.Result, error)
}

// Gateway serves the upstreams' tools to principals.
type Gateway struct {
	svc  *approval.Service
	pool Pool
}

// New returns the gateway over svc (which must have mcp.call) and pool.
func New(svc *approval.Service, pool Pool) *Gateway {
	return &Gateway{svc: svc, pool: pool}
}

// Guarded is the start of a guarded tool's description: what the agent
// (and the model) must know before it calls one.
const Guarded = "Needs a human's approval: countersign (the gateway in front of this MCP server) asks a person to approve each call of this tool, out of band. " +
	"Calling it runs nothing yet: it returns an operation, pending_approval, and the tool runs once, exactly as called, only after a human approves it; follow it with get_operation_status. "

// Tools lists the upstream tools p may call, as they are offered: named
// NAME__TOOL, with the upstream's input schema; a guarded tool's
// description says first that a human approves each call, its
// readOnlyHint is false and it has no output schema (its result is the
// operation). An upstream that is down offers none.
func (g *Gateway) Tools(p *approval.Principal) []*mcp.Tool {
	var out []*mcp.Tool
	for _, name := range g.pool.Names() {
		tools, err := g.pool.Tools(name)
		if err != nil {
			continue
		}
		for _, t := range tools {
			if t.Class == upstream.Hidden || t.Exposed == "" || !p.Allows(mcpcall.Scope(name, t.Name)) {
				continue
			}
			out = append(out, offered(t))
		}
	}
	return out
}

// offered is t as agents see it.
func offered(t upstream.Tool) *mcp.Tool {
	def := t.Def
	o := &mcp.Tool{Name: t.Exposed, Title: def.Title, Description: def.Description, InputSchema: def.InputSchema}
	if o.InputSchema == nil {
		o.InputSchema = map[string]any{"type": "object"}
	}
	if t.Class == upstream.Pass {
		o.OutputSchema, o.Annotations = def.OutputSchema, def.Annotations
		return o
	}
	o.Description = Guarded + "The server " + t.Upstream + " describes the tool so: " + def.Description
	a := mcp.ToolAnnotations{ReadOnlyHint: false}
	if def.Annotations != nil {
		a = *def.Annotations
		a.ReadOnlyHint = false
	}
	o.Annotations = &a
	return o
}

// Split parses NAME__TOOL; ok is false for a name that is no upstream
// tool (countersign's own tools have no double underscore).
func Split(exposed string) (name, tool string, ok bool) {
	name, tool, ok = strings.Cut(exposed, Separator)
	return name, tool, ok && name != "" && tool != ""
}

// Outcome is what a call did: Passed holds a pass tool's result, or
// Operation the guarded call's operation, pending a human.
type Outcome struct {
	Tool      string
	Passed    *upstream.Result
	Operation *approval.View
}

// Call calls the upstream tool named exposed (NAME__TOOL) for p with args
// (a JSON object; empty means none).
//
// Returns not_found (no such tool for p), insufficient_scope,
// rate_limited, policy_denied (a pass result over max_result_bytes),
// unavailable (the upstream is down or did not answer a pass call), and
// the codes of prepare and send for a guarded call.
func (g *Gateway) Call(ctx context.Context, p *approval.Principal, exposed string, args json.RawMessage) (Outcome, error) {
	name, tool, ok := Split(exposed)
	if !ok {
		return Outcome{}, approval.Errorf(approval.CodeNotFound, "no tool %q here", cutName(exposed))
	}
	spec, ok := g.pool.Spec(name)
	if !ok {
		return Outcome{}, approval.Errorf(approval.CodeNotFound, "no tool %q here", cutName(exposed))
	}
	t, ok, err := g.pool.Lookup(name, tool)
	if err != nil {
		return Outcome{}, err
	}
	if !ok || t.Class == upstream.Hidden || t.Exposed != exposed {
		return Outcome{}, approval.Errorf(approval.CodeNotFound, "no tool %q here; list the tools again", cutName(exposed))
	}
	if !p.Allows(mcpcall.Scope(name, tool)) {
		return Outcome{}, approval.Errorf(approval.CodeInsufficientScope, "principal %s may not call %s", p.ID, exposed).
			WithDetails(map[string]any{"scope": mcpcall.Scope(name, tool)})
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	if t.Class == upstream.Pass {
		return g.pass(ctx, p, spec, t, args)
	}
	return g.guard(ctx, p, t, args)
}

// pass runs a pass tool at once: counted against pass_rate, bounded by
// max_result_bytes, audited as passed.
func (g *Gateway) pass(ctx context.Context, p *approval.Principal, spec upstream.Spec, t upstream.Tool, args json.RawMessage) (Outcome, error) {
	if err := approval.CheckJSONDepth(args, "arguments"); err != nil {
		return Outcome{}, err
	}
	if err := g.svc.PassRate(ctx, p, spec.Name, spec.PassRate); err != nil {
		return Outcome{}, err
	}
	start := time.Now()
	res, err := g.pool.Call(ctx, spec.Name, t.Name, args, nil)
	details := map[string]any{"upstream": spec.Name, "tool": t.Name, "arguments_sha256": digest(args),
		"duration_ms": time.Since(start).Milliseconds()}
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "unavailable"
		if errors.Is(err, upstream.ErrOutcomeUnknown) {
			outcome = "no_answer"
			err = approval.Errorf(approval.CodeUnavailable, "the upstream %s did not answer in time; the call may or may not have run", spec.Name).
				WithDetails(map[string]any{"upstream": spec.Name})
		}
	case res.Cut:
		outcome = "too_large"
		details["bytes"] = res.Bytes
		err = approval.Errorf(approval.CodePolicyDenied, "the result of %s is %d bytes, more than this upstream's max_result_bytes (%d); ask for less",
			t.Exposed, res.Bytes, spec.MaxResultBytes).WithDetails(map[string]any{"rule": "max_result_bytes", "bytes": res.Bytes})
	default:
		details["bytes"] = res.Bytes
		if res.IsError {
			outcome = "tool_error"
		}
	}
	if nerr := g.svc.Passed(ctx, p, outcome, details); nerr != nil && err == nil {
		// Not audited, not answered: a pass call is audited or refused.
		return Outcome{}, nerr
	}
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Tool: t.Exposed, Passed: res}, nil
}

// guard makes the call an mcp.call operation and sends it to the route's
// approvers, in one step.
func (g *Gateway) guard(ctx context.Context, p *approval.Principal, t upstream.Tool, args json.RawMessage) (Outcome, error) {
	input, err := json.Marshal(mcpcall.Input{Upstream: t.Upstream, Tool: t.Name, Arguments: args})
	if err != nil {
		return Outcome{}, approval.FieldErrors{{Field: "arguments", Reason: "must be a JSON object"}}.Err()
	}
	op, _, err := g.svc.Prepare(ctx, p, approval.PrepareCall{Action: mcpcall.Name, Input: input})
	if err != nil {
		return Outcome{}, err
	}
	sent, err := g.svc.Send(ctx, p, op.Key)
	if err != nil {
		return Outcome{}, err
	}
	v := approval.AgentView(sent, g.svc.Now())
	return Outcome{Tool: t.Exposed, Operation: &v}, nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// cutName bounds a name echoed in an error.
func cutName(s string) string {
	if len(s) > 80 {
		return strings.ToValidUTF8(s[:80], "") + "…"
	}
	return s
}
