// Package upstream is the client side of the gateway (SPEC §12): it starts
// and keeps the MCP servers of the policy file's upstreams (stdio processes
// restarted with backoff, streamable HTTP servers), keeps their tool lists
// (refreshed on notifications/tools/list_changed and every minute), and
// calls their tools, bounded in size and time. Everything an upstream sends
// is foreign text: this package bounds it; callers escape and fence it.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/approval"
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

// Defaults of a Spec's zero fields.
const (
	DefaultMaxResultBytes int64 = 1 << 20
	DefaultPassRate             = 120
	DefaultTimeout              = 60 * time.Second
	DefaultRefresh              = time.Minute
)

// Limits of what an upstream may send.
const (
	// MaxTools is how many tools of one upstream are kept (the rest are
	// dropped and logged).
	MaxTools = 1000
	// MaxToolBytes bounds one tool definition's JSON; a larger one is
	// dropped and logged.
	MaxToolBytes = 64 << 10
	// MaxExposedName bounds NAME__TOOL.
	MaxExposedName = 64
)

// WithDefaults returns s with its zero limits set to the defaults.
func (s Spec) WithDefaults() Spec {
	if s.MaxResultBytes <= 0 {
		s.MaxResultBytes = DefaultMaxResultBytes
	}
	if s.PassRate <= 0 {
		s.PassRate = DefaultPassRate
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	return s
}

// MessageBound is the largest single message (a stdio line, an HTTP
// response body or server-sent event) read from the upstream:
// 4×MaxResultBytes + 1 MiB. A larger one fails the connection.
func (s Spec) MessageBound() int64 {
	return 4*s.WithDefaults().MaxResultBytes + 1<<20
}

// Transport is "stdio" or "http".
func (s Spec) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
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

// ErrOutcomeUnknown: the call was sent; whether it ran is not known.
var ErrOutcomeUnknown = errors.New("upstream: the call was sent and no answer came; whether it ran is not known")

// Pool keeps the upstreams.
type Pool struct {
	ups    []*upstream
	byName map[string]*upstream
	log    *slog.Logger

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New builds the pool; nothing starts before Start.
func New(specs []Spec, opts Options) *Pool {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	p := &Pool{byName: map[string]*upstream{}, log: opts.Logger}
	for _, s := range specs {
		u := newUpstream(s.WithDefaults(), opts)
		p.ups = append(p.ups, u)
		p.byName[s.Name] = u
	}
	return p
}

// Start connects every upstream in the background and keeps it until Close
// (restarts with backoff, 0.5 s doubling to 30 s; refresh). It returns at
// once. Cancelling ctx stops the upstreams as Close does (without waiting).
func (p *Pool) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	ctx, p.cancel = context.WithCancel(ctx)
	for _, u := range p.ups {
		p.wg.Go(func() { u.run(ctx) })
	}
}

// WaitListed waits until every upstream was tried once (listed or failed), or ctx ends.
func (p *Pool) WaitListed(ctx context.Context) error {
	for _, u := range p.ups {
		select {
		case <-u.tried:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close stops every upstream (stdio processes end, waited for: each gets
// SIGTERM, and SIGKILL 5 s later).
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	cancel := p.cancel
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	p.wg.Wait()
	return nil
}

// Names lists the upstreams in configured order.
func (p *Pool) Names() []string {
	names := make([]string, len(p.ups))
	for i, u := range p.ups {
		names[i] = u.spec.Name
	}
	return names
}

// Spec returns the named upstream's spec (defaults applied).
func (p *Pool) Spec(name string) (Spec, bool) {
	u, ok := p.byName[name]
	if !ok {
		return Spec{}, false
	}
	return u.spec, true
}

// Status reports every upstream.
func (p *Pool) Status() []Status {
	out := make([]Status, len(p.ups))
	for i, u := range p.ups {
		out[i] = u.status()
	}
	return out
}

// Tools lists the named upstream's tools as last listed (every class).
// Returns *approval.Error unavailable (details.upstream) while it is down,
// not_found for an upstream not configured. The Defs are shared: callers
// must not modify them.
func (p *Pool) Tools(name string) ([]Tool, error) {
	u, err := p.get(name)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess == nil {
		return nil, u.unavailableLocked()
	}
	return slices.Clone(u.tools), nil
}

// Lookup returns one tool as last listed: unavailable while down, and
// ok=false when the upstream has no such tool.
func (p *Pool) Lookup(name, tool string) (Tool, bool, error) {
	tools, err := p.Tools(name)
	if err != nil {
		return Tool{}, false, err
	}
	return find(tools, tool)
}

// Fresh lists the upstream's tools now (a tools/list round trip) and returns
// the named one: what execution checks tool_sha256 against. Returns
// unavailable when the upstream is down or the listing failed.
func (p *Pool) Fresh(ctx context.Context, name, tool string) (Tool, bool, error) {
	u, err := p.get(name)
	if err != nil {
		return Tool{}, false, err
	}
	tools, err := u.list(ctx)
	if err != nil {
		return Tool{}, false, err
	}
	return find(tools, tool)
}

func find(tools []Tool, name string) (Tool, bool, error) {
	for _, t := range tools {
		if t.Name == name {
			return t, true, nil
		}
	}
	return Tool{}, false, nil
}

func (p *Pool) get(name string) (*upstream, error) {
	u, ok := p.byName[name]
	if !ok {
		return nil, approval.Errorf(approval.CodeNotFound, "no upstream named %q is configured", name).
			WithDetails(map[string]any{"upstream": name})
	}
	return u, nil
}

// Call calls tool on the named upstream with args (a JSON object) and meta
// as the request's _meta, bounded by the upstream's Timeout and
// MaxResultBytes. Errors: *approval.Error unavailable (details.upstream)
// when the upstream is down and nothing was sent; ErrOutcomeUnknown
// (wrapped) when the request was sent and no answer came (timeout, crash,
// a message over the size bound). A tool error is a Result with IsError,
// not an error; so is a JSON-RPC error the upstream answered with (Text is
// its message). If ctx ended before anything was sent, its error is
// returned. Call does not check the tool's class: the caller does.
func (p *Pool) Call(ctx context.Context, name, tool string, args json.RawMessage, meta map[string]any) (*Result, error) {
	u, err := p.get(name)
	if err != nil {
		return nil, err
	}
	return u.call(ctx, tool, args, meta)
}
