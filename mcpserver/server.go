// Package mcpserver is countersign's MCP surface (SPEC §6): the tools with
// which an agent prepares, sends and follows operations, written once
// against Backend. countersign serve mounts it as stateless streamable
// HTTP at /mcp over the in-process service (NewHTTPHandler, Local);
// countersign mcp runs it over stdio, bridging to a running service
// through the REST client (client.Client).
//
// No tool approves, rejects or decides anything, and no result or error
// carries a capability: results are the agent's view of an operation
// (approval.View), and errors are the contract's coded errors.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/countersign/countersign/action/registry"
	"github.com/countersign/countersign/approval/jsonx"

	"github.com/countersign/countersign/approval"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Options configure the MCP server. The zero value is fine.
type Options struct {
	// Name and Version identify the server to clients (default
	// "countersign" and "dev").
	Name, Version string
	// Logger receives one line per tool call (tool, operation key, outcome,
	// duration) and the text of internal errors. It must not be stdout on
	// stdio. Default: discard.
	Logger *slog.Logger
	// Tracer makes a span per tool call, under the caller's (default: none).
	Tracer trace.TracerProvider
	// Actions, when set, are the actions the service has: the prepare
	// tools of the others are not listed (development mode without Slack
	// or HTTP targets lists prepare_email only), and prepare_undo only
	// with an action that can be undone. Unset: every tool.
	Actions []string
	// Tools, when set, are the tools the service behind the backend can
	// serve (the stdio bridge asks GET /v1/tools): no other is listed, and
	// the instructions name these. Unset: every tool (of Actions).
	Tools []string
}

// BackendFunc picks the backend of one tool call: on HTTP, the principal
// of the request's bearer key.
type BackendFunc func(ctx context.Context, req *mcp.CallToolRequest) (Backend, error)

// NewServer returns the MCP server with every tool, calling b.
func NewServer(b Backend, opts *Options) *mcp.Server {
	return NewServerFunc(func(context.Context, *mcp.CallToolRequest) (Backend, error) { return b, nil }, opts)
}

// NewServerFunc returns the MCP server with every tool, calling the
// backend pick returns for each call.
func NewServerFunc(pick BackendFunc, opts *Options) *mcp.Server {
	return newServer(pick, opts).mcp
}

// Tools are the tools a server with opts lists, as tools/list shows them:
// what GET /v1/tools answers, so that the stdio bridge lists the same.
func Tools(opts *Options) []*mcp.Tool {
	s := newServer(nil, opts)
	var out []*mcp.Tool
	for _, t := range s.tools {
		if !slices.Contains(s.unavailable, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

func newServer(pick BackendFunc, opts *Options) *server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "countersign"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Tracer == nil {
		o.Tracer = noop.NewTracerProvider()
	}
	unavailable := unavailableTools(o.Actions)
	if o.Tools != nil {
		for _, t := range ToolNames {
			if !slices.Contains(o.Tools, t) && !slices.Contains(unavailable, t) {
				unavailable = append(unavailable, t)
			}
		}
	}
	s := &server{
		unavailable: unavailable,
		mcp: mcp.NewServer(&mcp.Implementation{Name: o.Name, Title: "countersign: human-approved actions", Version: o.Version},
			&mcp.ServerOptions{
				Instructions: instructions(unavailable),
				Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
			}),
		pick:   pick,
		log:    o.Logger,
		tracer: o.Tracer.Tracer("github.com/countersign/countersign/mcpserver"),
	}
	s.addTools()
	s.mcp.RemoveTools(unavailable...)
	return s
}

// unavailableTools are the tools of actions not in actions (none when
// actions is nil).
func unavailableTools(actions []string) []string {
	if actions == nil {
		return nil
	}
	var out []string
	undo := false
	for _, d := range registry.All {
		here := slices.Contains(actions, d.Name)
		if d.Tool != nil && !here {
			out = append(out, d.Tool.Name)
		}
		undo = undo || (here && d.Undo)
	}
	if !undo {
		out = append(out, ToolPrepareUndo) // e.g. an email cannot be undone
	}
	slices.Sort(out)
	return out
}

type server struct {
	mcp *mcp.Server
	// tools are every tool added, unavailable those not listed.
	tools       []*mcp.Tool
	unavailable []string
	pick        BackendFunc
	log         *slog.Logger
	tracer      trace.Tracer
}

// result is what a tool produced: structured content and the text for the
// model.
type result struct {
	structured any
	text       string
	key        string
	status     approval.Status
}

// viewResult is a tool's result for v, compact (SPEC §13): large input
// values stand in as their size, digest and head, whichever backend made
// v (a view the REST API compacted already stays as it is).
func viewResult(v approval.View, text string) result {
	return result{structured: approval.Compact(v), text: text, key: v.OperationKey, status: v.Status}
}

// fullResult is viewResult with the whole input (get_operation_status
// with full).
func fullResult(v approval.View, text string) result {
	return result{structured: v, text: text, key: v.OperationKey, status: v.Status}
}

// fullGetter is a Backend that returns the whole input only when asked
// (the REST client: ?full=1). Local's views are always whole.
type fullGetter interface {
	GetFull(ctx context.Context, key string, wait time.Duration) (approval.View, error)
}

// The output schemas describe a result, and also admit a tool error's
// structured content ({"error": {code, message, details}}): the
// TypeScript SDK client validates structured content against the output
// schema even when isError is set, and throws on a mismatch, which would
// hide the error from the model. So no property is required at the top,
// and "error" takes the contract's error object as well as an operation's.
var (
	viewSchema = portable(openTop(mustSchema[approval.View](describeView)))
	listSchema = portable(openTop(mustSchema[ListResult](func(p map[string]*jsonschema.Schema) {
		p["operations"].Items = mustSchema[approval.View](describeView)
		p["operations"].Description = "your operations, newest first"
		p["error"] = mustSchema[approval.Error](nil)
		p["error"].Description = "in a tool error only: the error of the call"
	})))
)

func openTop(s *jsonschema.Schema) *jsonschema.Schema {
	s.Required = nil
	return s
}

// describeView documents the operation object for models and clients.
func describeView(p map[string]*jsonschema.Schema) {
	statuses := make([]any, len(approval.Statuses))
	for i, st := range approval.Statuses {
		statuses[i] = string(st)
	}
	p["status"].Enum = statuses
	p["input"] = &jsonschema.Schema{AnyOf: []*jsonschema.Schema{{Type: "object"}, {Type: "null"}},
		Description: "the normalized input, exactly what executes once approved (null once a draft that was never sent has ended)"}
	for name, d := range map[string]string{
		"operation_key":       "the operation's key: keep it to follow, send or cancel the operation",
		"status":              "draft, pending_approval, approved, executing; final: succeeded, failed, rejected, expired, canceled",
		"expires_at":          "when the draft expires, or when the approval window ends",
		"payload_hash":        "SHA-256 of the canonical action, input and principal: what the human approves",
		"input":               "the normalized input, exactly what executes once approved; a large value (a body, an attachment's content) is shown as {omitted: true, bytes, sha256, head} unless get_operation_status is called with full: true",
		"preview":             "what the human approver sees",
		"approval":            "who must approve, who did, who rejected (with the reason), and who was notified",
		"result":              "the action's result once it succeeded",
		"error":               "why the operation failed (status failed); in a tool error, the only property: the error of the call {code, message, details}",
		"next_step":           "what to do next, in plain words",
		"retry_after_seconds": "a sensible delay before polling again",
	} {
		if s := p[name]; s != nil {
			s.Description = d
		}
	}
}

// mustSchema infers T's schema; edit adjusts its properties.
func mustSchema[T any](edit func(map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](schemaOptions)
	if err != nil {
		panic(err)
	}
	if edit != nil {
		edit(s.Properties)
	}
	return s
}

// inputSchema is T's schema for a model: arrays are arrays (not
// "null or array"), as the arguments are read strictly.
func inputSchema[T any](edit func(map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s := mustSchema[T](edit)
	var strip func(*jsonschema.Schema)
	strip = func(p *jsonschema.Schema) {
		if len(p.Types) == 2 && p.Types[0] == "null" {
			p.Type, p.Types = p.Types[1], nil
		}
		for _, q := range p.Properties {
			strip(q)
		}
		if p.Items != nil {
			strip(p.Items)
		}
	}
	for _, p := range s.Properties {
		strip(p)
	}
	return portable(s)
}

// CallTimeout bounds one tool call (get_operation_status gets its longest
// wait on top, and the prepares that read an HTTP target the target's
// longest timeout), so that during a store outage every call answers
// unavailable within 5 s.
const CallTimeout = 3500 * time.Millisecond

// targetTimeout is the longest timeout an HTTP target may have.
const targetTimeout = 2 * time.Minute

// add registers one tool: strict argument decoding (invalid_input with
// the contract's codes, never the SDK's validator prose), the backend call,
// and the translation of its outcome into a result or a tool error.
func add[In any](s *server, t *mcp.Tool, edit func(map[string]*jsonschema.Schema), run func(context.Context, Backend, In) (result, error)) {
	t.InputSchema = inputSchema[In](edit)
	if t.Name == ToolListOperations {
		t.OutputSchema = listSchema
	} else {
		t.OutputSchema = viewSchema
	}
	s.tools = append(s.tools, t)
	name := t.Name
	timeout := CallTimeout
	switch name {
	case ToolGetOperationStatus:
		timeout += MaxWaitSeconds * time.Second
	case ToolPrepareHTTPRequest, ToolPrepareUndo:
		timeout += targetTimeout // these read an HTTP target first
	}
	s.mcp.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// A deadline for the store calls of the tool call: during a store
		// outage it ends in unavailable in time (the HTTP transport's own
		// context only ends at shutdown).
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		ctx, sp := s.tracer.Start(ctx, "tools/call "+name, trace.WithAttributes(
			attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", name)))
		defer sp.End()
		start := time.Now()
		var res result
		in, err := decodeArgs[In](req.Params.Arguments)
		if err == nil {
			var b Backend
			if b, err = s.pick(ctx, req); err == nil {
				res, err = run(ctx, b, in)
			}
		}
		attrs := []any{"tool", name, "duration_ms", time.Since(start).Milliseconds()}
		if err != nil {
			out, code := s.errorResult(name, err)
			sp.SetAttributes(attribute.String("countersign.error", string(code)))
			sp.SetStatus(codes.Error, string(code))
			s.log.Info("mcp tool call", append(attrs, "error", code)...)
			return out, nil
		}
		if res.key != "" {
			attrs = append(attrs, "operation", res.key, "status", res.status)
			sp.SetAttributes(attribute.String("countersign.operation", res.key), attribute.String("countersign.status", string(res.status)))
		}
		s.log.Info("mcp tool call", attrs...)
		return okResult(res)
	})
}

// okResult is the structured content plus the text for the model, and the
// serialized JSON for clients that only read text content.
func okResult(res result) (*mcp.CallToolResult, error) {
	data, err := jsonx.Marshal(res.structured)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: res.text}, &mcp.TextContent{Text: string(data)}},
		StructuredContent: json.RawMessage(data),
	}, nil
}

// ErrorContent is the structured content of a tool error: the contract's
// error object.
type ErrorContent struct {
	Error *approval.Error `json:"error"`
}

// errorResult turns err into a tool error carrying the contract's code and
// message in the text and in structured content. Foreign errors are logged
// and shown as internal, never with their text.
func (s *server) errorResult(tool string, err error) (*mcp.CallToolResult, approval.Code) {
	var e *approval.Error
	if !errors.As(err, &e) {
		s.log.Error("mcp tool failed", "tool", tool, "err", err)
		e = approval.Errorf(approval.CodeInternal, "internal error; it has been logged")
	}
	data, _ := jsonx.Marshal(ErrorContent{Error: e})
	res := &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: errorText(e)}},
		StructuredContent: json.RawMessage(data),
	}
	return res, e.Code
}
