// Package mcpcall is the mcp.call action (SPEC §12): one call of a guarded
// tool of an upstream MCP server, approved by a human and then made once.
//
// Input:
//
//	{"upstream": "files", "tool": "write_file", "arguments": {…}, "tool_sha256": "…"}
//
// tool_sha256 is filled in at prepare from the tool's definition as the
// upstream lists it then (an agent may pin it; a different one is
// stale_state). Execution refuses a tool whose definition no longer hashes
// to it, and, where the upstream's state: binds the tool to a read tool,
// a read that returns something else than what the human saw.
//
// Everything the upstream says (its description, its schema's titles, what
// its read tool returns) is foreign text: it is bounded here and shown
// fenced and escaped by the channels, like the agent's own text.
package mcpcall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/upstream"
)

// Upstreams is what the action needs of the gateway's upstreams
// (*upstream.Pool).
type Upstreams interface {
	Spec(name string) (upstream.Spec, bool)
	Lookup(name, tool string) (upstream.Tool, bool, error)
	Fresh(ctx context.Context, name, tool string) (upstream.Tool, bool, error)
	Call(ctx context.Context, name, tool string, args json.RawMessage, meta map[string]any) (*upstream.Result, error)
}

// Input is the normalized input.
type Input struct {
	Upstream   string          `json:"upstream"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	ToolSHA256 string          `json:"tool_sha256"`
}

// The _meta members a call carries to the upstream.
const (
	MetaOperation = "io.countersign/operation"
	MetaReceipt   = "io.countersign/receipt"
)

// Action is mcp.call.
type Action struct {
	up Upstreams
}

var (
	_ approval.Action     = (*Action)(nil)
	_ approval.Rechecker  = (*Action)(nil)
	_ approval.ScopeBaser = (*Action)(nil)
)

// New builds mcp.call over the gateway's upstreams.
func New(up Upstreams) *Action { return &Action{up: up} }

// Name implements approval.Action.
func (*Action) Name() string { return Name }

// ScopeBase implements approval.ScopeBaser: "mcp:NAME[/TOOL]".
func (*Action) ScopeBase() string { return ScopeBase }

// Scope is the scope one call needs; "mcp:NAME" covers it too.
func Scope(upstreamName, tool string) string { return ScopeBase + ":" + upstreamName + "/" + tool }

var (
	namePattern = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	toolPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	hexPattern  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Prepare checks the call against the tool as the upstream lists it now,
// binds it to the tool's definition and, where configured, to what the
// read tool returns, and reports its attributes. It calls no guarded tool.
//
// Returns invalid_input, stale_state (a pinned tool_sha256 that no longer
// matches) and unavailable (the upstream is down).
func (a *Action) Prepare(ctx context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	in, args, err := decode(req.Input)
	if err != nil {
		return nil, err
	}
	spec, ok := a.up.Spec(in.Upstream)
	if !ok {
		return nil, approval.FieldErrors{{Field: "upstream", Reason: "no upstream of that name is configured"}}.Err()
	}
	tool, ok, err := a.up.Lookup(in.Upstream, in.Tool)
	if err != nil {
		return nil, err
	}
	if !ok || tool.Class == upstream.Hidden {
		return nil, approval.FieldErrors{{Field: "tool", Reason: "the upstream " + in.Upstream + " offers no tool of that name"}}.Err()
	}
	if in.ToolSHA256 != "" && in.ToolSHA256 != tool.SHA256 {
		return nil, approval.Errorf(approval.CodeStaleState, "the tool's definition changed since you listed it: list the tools again and call it anew").
			WithDetails(map[string]any{"reason": "tool_changed", "upstream": in.Upstream, "tool": in.Tool})
	}
	in.ToolSHA256 = tool.SHA256
	if err := checkArgs(tool, args); err != nil {
		return nil, err
	}
	attrs := map[string]string{"target": in.Upstream, "tool": in.Tool}
	approval.NewAttrSet(attrs).AddJSON([]string{"args"}, args)

	var state *approval.StateBinding
	var read *stateRead
	if sr, ok := spec.State[in.Tool]; ok {
		read, err = a.readState(ctx, in, sr, args)
		if err != nil {
			return nil, err
		}
		state = read.binding()
	}
	return &approval.Prepared{Input: in, Preview: preview(in, tool, args, read),
		Scope: Scope(in.Upstream, in.Tool), Attrs: attrs, State: state}, nil
}

// decode reads and checks the input; args is the arguments decoded
// (numbers as json.Number).
func decode(raw json.RawMessage) (Input, map[string]any, error) {
	var in Input
	if err := approval.DecodeInput(raw, &in, "must be an object {upstream, tool, arguments, tool_sha256?}"); err != nil {
		return in, nil, err
	}
	var fe approval.FieldErrors
	if !namePattern.MatchString(in.Upstream) {
		fe.Add("upstream", "required: the upstream's name as the policy file configures it")
	}
	if !toolPattern.MatchString(in.Tool) {
		fe.Add("tool", "required: the tool's name as the upstream lists it")
	}
	if in.ToolSHA256 != "" && !hexPattern.MatchString(in.ToolSHA256) {
		fe.Add("tool_sha256", "must be 64 lowercase hex digits (the tool's definition hash), or absent")
	}
	var args map[string]any
	if len(in.Arguments) == 0 || string(in.Arguments) == "null" {
		in.Arguments = json.RawMessage(`{}`)
	}
	d := json.NewDecoder(bytes.NewReader(in.Arguments))
	d.UseNumber()
	if d.Decode(&args) != nil || args == nil {
		fe.Add("arguments", "must be the tool's arguments as a JSON object")
	}
	return in, args, fe.Err()
}

// Recheck implements approval.Rechecker: the page and the chat channels
// warn before anyone approves a call whose tool or state moved on. It
// calls only the read tool.
func (a *Action) Recheck(ctx context.Context, op *approval.Operation) error {
	in, args, err := decode(op.Input)
	if err != nil {
		return &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "stored input is unreadable"}
	}
	return a.check(ctx, op, in, args)
}

// check re-reads what the approval is bound to: the tool's definition, and
// the state where configured. It returns stale_state when either moved.
func (a *Action) check(ctx context.Context, op *approval.Operation, in Input, args map[string]any) error {
	var tool upstream.Tool
	var ok bool
	err := whileDown(ctx, func() (err error) {
		tool, ok, err = a.up.Fresh(ctx, in.Upstream, in.Tool)
		return err
	})
	if err != nil {
		return unavailable(err, "the tool's definition could not be read; nothing was called")
	}
	if !ok || tool.Class == upstream.Hidden || tool.SHA256 != in.ToolSHA256 {
		msg := "the upstream changed the tool's definition after it was approved; nothing was called"
		if !ok || tool.Class == upstream.Hidden {
			msg = "the upstream no longer offers the tool; nothing was called"
		}
		return &approval.ExecError{Code: approval.CodeStaleState, Message: msg,
			Details: map[string]any{"reason": "tool_changed", "upstream": in.Upstream, "tool": in.Tool}}
	}
	if op.State == nil {
		return nil
	}
	spec, _ := a.up.Spec(in.Upstream)
	sr, ok := spec.State[in.Tool]
	if !ok {
		return nil // the binding was made under an older policy; the approval still holds it
	}
	var read *stateRead
	err = whileDown(ctx, func() (err error) {
		read, err = a.readState(ctx, in, sr, args)
		return err
	})
	if err != nil {
		return unavailable(err, "the state could not be read again; nothing was called")
	}
	if read.hash != op.State.Hash {
		return &approval.ExecError{Code: approval.CodeStaleState,
			Message: "what " + sr.Tool + " returns changed after the call was prepared; nothing was called",
			Details: map[string]any{"reason": "state_changed", "upstream": in.Upstream, "tool": in.Tool}}
	}
	return nil
}

// DownWait is how long an approved call waits for its upstream to come
// back (a stdio server being restarted) before it fails with nothing
// called: an approval is worth a short wait.
var DownWait = 30 * time.Second

// whileDown runs f until it succeeds, fails otherwise than unavailable, or
// DownWait (or ctx) ends.
func whileDown(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(DownWait)
	for {
		err := f()
		var ae *approval.Error
		if err == nil || !errors.As(err, &ae) || ae.Code != approval.CodeUnavailable || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// unavailable turns a failed read before the call into an execution error
// with a known outcome: nothing was called.
func unavailable(err error, msg string) error {
	var ee *approval.ExecError
	if errors.As(err, &ee) {
		return ee
	}
	d := map[string]any{"phase": "recheck"}
	var ae *approval.Error
	if errors.As(err, &ae) && ae.Code == approval.CodeUnavailable {
		d["upstream"] = ae.Details["upstream"]
	}
	return &approval.ExecError{Code: approval.CodeExecutionFailed, Message: msg, Details: d}
}

// Execute re-checks the tool and the state, then calls the tool once with
// the operation key and the receipt in _meta. Its result is the upstream's,
// bounded.
func (a *Action) Execute(ctx context.Context, op *approval.Operation) (json.RawMessage, error) {
	in, args, err := decode(op.Input)
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "stored input is unreadable"}
	}
	if err := a.check(ctx, op, in, args); err != nil {
		return nil, err
	}
	tok, err := approval.CountersignerFrom(ctx).Mint(approval.ReceiptRequest{Audience: in.Upstream})
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "could not sign the receipt; nothing was called",
			Details: map[string]any{"phase": "receipt"}}
	}
	meta := map[string]any{MetaOperation: op.Key}
	if tok != "" {
		meta[MetaReceipt] = tok
	}
	if err := approval.CheckClaim(ctx); err != nil {
		return nil, approval.ClaimLostExecError(err)
	}
	res, err := a.up.Call(ctx, in.Upstream, in.Tool, in.Arguments, meta)
	if err != nil {
		if errors.Is(err, upstream.ErrOutcomeUnknown) {
			return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, OutcomeUnknown: true,
				Message: "the call was sent to " + in.Upstream + " and no answer came; whether the tool ran is not known, and countersign will not call it again",
				Details: map[string]any{"upstream": in.Upstream, "tool": in.Tool}}
		}
		return nil, unavailable(err, "the upstream "+in.Upstream+" is unavailable; nothing was called")
	}
	out, err := json.Marshal(resultOf(res, tok))
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return out, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: errorText(res),
			Details: map[string]any{"upstream": in.Upstream, "tool": in.Tool, "is_error": true}}
	}
	return out, nil
}

// Result is what a succeeded (or tool-failed) mcp.call records: the
// upstream's result, bounded.
type Result struct {
	Content           json.RawMessage `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	// Cut says the result was longer than max_result_bytes: Content holds
	// its head, Bytes and SHA256 describe the whole.
	Cut     bool   `json:"cut,omitempty"`
	Bytes   int    `json:"bytes"`
	SHA256  string `json:"sha256"`
	Receipt string `json:"receipt,omitempty"`
}

func resultOf(r *upstream.Result, receipt string) Result {
	content := r.Content
	if len(content) == 0 {
		content = json.RawMessage(`[]`)
	}
	return Result{Content: content, StructuredContent: r.Structured, IsError: r.IsError, Cut: r.Cut,
		Bytes: r.Bytes, SHA256: r.SHA256, Receipt: receipt}
}

// maxErrorText bounds the tool's error text an operation records as its
// message.
const maxErrorText = 1000

// errorText is a tool error's message: its text, bounded.
func errorText(r *upstream.Result) string {
	t := strings.TrimSpace(r.Text)
	if t == "" {
		return "the tool answered with an error and no text"
	}
	if len(t) > maxErrorText {
		t = strings.ToValidUTF8(t[:maxErrorText], "") + "…"
	}
	return "the tool answered with an error: " + t
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
