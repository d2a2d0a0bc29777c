// Package upstream is the client side of the gateway (SPEC §12): it starts
// and keeps the MCP servers of the policy file's upstreams (stdio processes
// restarted with backoff, streamable HTTP servers), keeps their tool lists
// (refreshed on notifications/tools/list_changed and every minute), and
// calls their tools, bounded in size and time. Everything an upstream sends
// is foreign text: this package bounds it; callers escape and fence it.
package upstream

import (
	"errors"
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Spec is one upstream as configured (cmd/countersign builds it from the
// policy file, ${ENV} references already expanded).
type Spec struct {
	Name    string            // [a-z0-9-]{1,32}
	Command []string          // stdio: the program and its arguments; or
	Env     map[string]string // stdio: added to the process's environment
	URL     string            // streamable HTTP endpoint
	Headers map[string]string // HTTP: sent with every request
	Pass    []string          // tools that run at once
	Hide    []string          // tools never offered
	// State binds a guarded tool's approval to what a read tool returns,
	// by guarded tool name.
	State          map[string]StateRead
	MaxResultBytes int64         // default 1 MiB
	PassRate       int           // pass calls per minute per principal; default 120
	Timeout        time.Duration // one call (tools/call, tools/list); default 60 s
}

// StateRead is the read tool that shows what a guarded call will change.
type StateRead struct {
	Tool string
	// Args are the read tool's arguments: a value "{name}" is the guarded
	// call's argument name (top level), anything else a literal string.
	Args map[string]string
	// Diff names the guarded call's argument compared line by line with
	// the read tool's text ("" = no diff, state binding only).
	Diff string
}

// Class is what the gateway does with a tool.
type Class string

const (
	Pass    Class = "pass"
	Guarded Class = "guarded"
	Hidden  Class = "hidden"
)

// Tool is one tool of an upstream as last listed.
type Tool struct {
	Upstream string
	Name     string // as the upstream names it
	// Exposed is NAME__TOOL; "" when the tool cannot be offered (Why says
	// why: the name would be longer than 64 characters or use other than
	// [A-Za-z0-9_-]).
	Exposed string
	Why     string
	Class   Class
	// SHA256 is ToolSHA256 of Def.
	SHA256 string
	// Def is the definition as the upstream listed it (foreign text).
	Def *mcp.Tool
}

// ToolSHA256 is the hex SHA-256 of the JCS (RFC 8785) of the tool's name,
// title, description, inputSchema, outputSchema and annotations (not _meta
// or icons), absent members left out.
func ToolSHA256(t *mcp.Tool) string { panic("skeleton") }

// Result is a tool call's result, bounded.
type Result struct {
	IsError bool
	// Content is the result's content array and Structured its
	// structuredContent (nil when none), as the upstream sent them, unless
	// Cut.
	Content    json.RawMessage
	Structured json.RawMessage
	// Text is the text of its text contents joined by "\n" (cut at
	// MaxResultBytes): what a state read compares and shows, and an error's message.
	Text string
	// Bytes and SHA256 describe the whole result as received (its JSON).
	Bytes  int
	SHA256 string
	// Cut says the result was larger than MaxResultBytes: Content then holds
	// one text item with the head of it, Structured is nil.
	Cut bool
}

// Status is one upstream's health, for /readyz and check-config.
type Status struct {
	Name      string    `json:"name"`
	Transport string    `json:"transport"` // "stdio" or "http"
	Up        bool      `json:"up"`
	Error     string    `json:"error,omitempty"` // why it is down (no secrets: never a header or env value)
	Tools     int       `json:"tools"`
	Pass      int       `json:"pass"`
	Guarded   int       `json:"guarded"`
	Hidden    int       `json:"hidden"`
	Restarts  int       `json:"restarts"`
	ListedAt  time.Time `json:"listed_at,omitzero"`
}

// Options configure a Pool.
type Options struct {
	Logger  *slog.Logger  // stderr lines of stdio upstreams ("upstream", name), restarts, refresh errors
	Refresh time.Duration // tool list refresh interval; default 1 min
}

// Pool keeps the upstreams.
type Pool struct{}

// New builds the pool; nothing starts before Start.
func New(specs []Spec, opts Options) *Pool { panic("skeleton") }

// Start connects every upstream in the background and keeps it until Close
// (restarts with backoff, 0.5 s doubling to 30 s; refresh). It returns at once.
func (p *Pool) Start(ctx context.Context) { panic("skeleton") }

// WaitListed waits until every upstream was tried once (listed or failed), or ctx ends.
func (p *Pool) WaitListed(ctx context.Context) error { panic("skeleton") }

// Close stops every upstream (stdio processes end, waited for).
func (p *Pool) Close() error { panic("skeleton") }

// Names lists the upstreams in configured order.
func (p *Pool) Names() []string { panic("skeleton") }

// Spec returns the named upstream's spec.
func (p *Pool) Spec(name string) (Spec, bool) { panic("skeleton") }

// Status reports every upstream.
func (p *Pool) Status() []Status { panic("skeleton") }

// Tools lists the named upstream's tools as last listed (every class).
// Returns *approval.Error unavailable (details.upstream) while it is down.
func (p *Pool) Tools(name string) ([]Tool, error) { panic("skeleton") }

// Lookup returns one tool as last listed: unavailable while down, and
// ok=false when the upstream has no such tool.
func (p *Pool) Lookup(name, tool string) (Tool, bool, error) { panic("skeleton") }

// Fresh lists the upstream's tools now (a tools/list round trip) and returns
// the named one: what execution checks tool_sha256 against.
func (p *Pool) Fresh(ctx context.Context, name, tool string) (Tool, bool, error) { panic("skeleton") }

// Call calls tool on the named upstream with args (a JSON object) and meta
// as the request's _meta, bounded by the upstream's Timeout and
// MaxResultBytes. Errors: *approval.Error unavailable (details.upstream)
// when the upstream is down and nothing was sent; ErrOutcomeUnknown
// (wrapped) when the request was sent and no answer came (timeout, crash,
// a message over the size bound). A tool error is a Result with IsError,
// not an error.
func (p *Pool) Call(ctx context.Context, name, tool string, args json.RawMessage, meta map[string]any) (*Result, error) { panic("skeleton") }

// ErrOutcomeUnknown: the call was sent; whether it ran is not known.
var ErrOutcomeUnknown = errors.New("outcome unknown")
