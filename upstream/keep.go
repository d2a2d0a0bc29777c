package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/approval"
)

// Backoff of restarts: 0.5 s doubling to 30 s, back to 0.5 s once an
// upstream stayed up a minute.
const (
	backoffMin   = 500 * time.Millisecond
	backoffMax   = 30 * time.Second
	backoffReset = time.Minute
	// listDebounce gathers notifications/tools/list_changed into one listing.
	listDebounce = 200 * time.Millisecond
	// maxListPages bounds a paginated tools/list.
	maxListPages = 100
)

// upstream is one configured upstream and its current session.
type upstream struct {
	spec    Spec
	log     *slog.Logger
	refresh time.Duration
	secrets []string // header and env values, never shown in an error

	tried     chan struct{} // closed once the first connection was tried
	triedOnce sync.Once
	changed   chan struct{} // a list_changed notification arrived (cap 1)
	listMu    sync.Mutex    // one tools/list at a time, applied in order

	mu       sync.Mutex
	sess     *mcp.ClientSession // nil while down
	conn     *watchConn         // stdio: sees the raw responses
	tools    []Tool
	listedAt time.Time
	err      string
	restarts int
}

func newUpstream(s Spec, opts Options) *upstream {
	u := &upstream{
		spec:    s,
		log:     opts.Logger.With("upstream", s.Name),
		refresh: opts.Refresh,
		tried:   make(chan struct{}),
		changed: make(chan struct{}, 1),
		err:     "not started",
	}
	for _, v := range s.Headers {
		u.secrets = append(u.secrets, v)
	}
	for _, v := range s.Env {
		u.secrets = append(u.secrets, v)
	}
	// Longest first, so a value containing another is redacted whole.
	slices.SortFunc(u.secrets, func(a, b string) int { return len(b) - len(a) })
	return u
}

// redact removes every header and env value from an error's text.
func (u *upstream) redact(s string) string {
	for _, v := range u.secrets {
		if len(v) >= 3 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// unavailableLocked is the error of a call while the upstream is down. Its
// message is ours alone: why it is down (foreign text, maybe) is in Status
// and the log.
func (u *upstream) unavailableLocked() error {
	return approval.Errorf(approval.CodeUnavailable, "upstream %s is unavailable", u.spec.Name).
		WithDetails(map[string]any{"upstream": u.spec.Name})
}

// unavailable is an error of a call that failed before anything was sent;
// the cause is logged, not shown.
func (u *upstream) unavailable(what string, cause error) error {
	u.log.Warn("upstream "+what+" failed", "error", u.reason(cause.Error()))
	return approval.Errorf(approval.CodeUnavailable, "upstream %s is unavailable (%s failed)", u.spec.Name, what).
		WithDetails(map[string]any{"upstream": u.spec.Name})
}

// maxReason bounds the text kept of why an upstream is down.
const maxReason = 512

// reason is an error's text fit for Status and the log: no header or env
// value, valid UTF-8, bounded.
func (u *upstream) reason(s string) string {
	return cutUTF8(strings.ToValidUTF8(u.redact(s), "\uFFFD"), maxReason)
}

func (u *upstream) status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	st := Status{
		Name: u.spec.Name, Transport: u.spec.Transport(), Up: u.sess != nil,
		Tools: len(u.tools), Restarts: u.restarts, ListedAt: u.listedAt,
	}
	if u.sess == nil {
		st.Error = u.err
	}
	for _, t := range u.tools {
		switch t.Class {
		case Pass:
			st.Pass++
		case Guarded:
			st.Guarded++
		case Hidden:
			st.Hidden++
		}
	}
	return st
}

// run keeps the upstream connected until ctx ends.
func (u *upstream) run(ctx context.Context) {
	defer u.triedOnce.Do(func() { close(u.tried) })
	delay := backoffMin
	for first := true; ; first = false {
		if !first {
			u.mu.Lock()
			u.restarts++
			u.mu.Unlock()
		}
		upSince, err := u.session(ctx)
		if ctx.Err() != nil {
			u.down("closed")
			return
		}
		if !upSince.IsZero() && time.Since(upSince) >= backoffReset {
			delay = backoffMin
		}
		u.log.Warn("upstream down; restarting", "error", u.reason(err.Error()), "in", delay)
		select {
		case <-ctx.Done():
			u.down("closed")
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, backoffMax)
	}
}

func (u *upstream) down(why string) {
	u.mu.Lock()
	u.sess, u.conn = nil, nil
	u.err = u.reason(why)
	u.mu.Unlock()
	u.triedOnce.Do(func() { close(u.tried) })
}

// session connects once, lists the tools and keeps the session (refreshing
// its tool list) until it ends. It returns when the session went up (zero
// if it never did) and why it ended.
func (u *upstream) session(ctx context.Context) (time.Time, error) {
	t, err := u.transport()
	if err != nil {
		u.down(err.Error())
		return time.Time{}, err
	}
	defer t.stop()
	client := mcp.NewClient(&mcp.Implementation{Name: "countersign", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case u.changed <- struct{}{}:
			default:
			}
		},
	})
	cctx, cancel := context.WithTimeout(ctx, u.spec.Timeout)
	cs, err := client.Connect(cctx, t, nil)
	cancel()
	if err != nil {
		err = fmt.Errorf("connect: %w", err)
		u.down(err.Error())
		return time.Time{}, err
	}
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	defer func() { _ = cs.Close(); <-ended }()

	if _, err := u.listOn(ctx, cs, true); err != nil {
		err = fmt.Errorf("tools/list: %w", err)
		u.down(err.Error())
		return time.Time{}, err
	}
	u.mu.Lock()
	u.sess, u.conn, u.err = cs, t.watch, ""
	u.mu.Unlock()
	since := time.Now()
	u.triedOnce.Do(func() { close(u.tried) })
	u.log.Info("upstream up", "tools", len(u.snapshot()))
	tick := time.NewTicker(u.refresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return since, ctx.Err()
		case err := <-ended:
			ended <- err // for the deferred receive
			if err == nil {
				err = errors.New("connection closed")
			}
			err = fmt.Errorf("connection lost: %w", err)
			if e := t.exited(); e != "" {
				err = fmt.Errorf("%s (%w)", e, err)
			}
			u.down(err.Error())
			return since, err
		case <-tick.C:
			u.relist(ctx)
		case <-u.changed:
			select {
			case <-ctx.Done():
				continue
			case <-time.After(listDebounce):
			}
			select {
			case <-u.changed:
			default:
			}
			u.relist(ctx)
		}
	}
}

// relist refreshes the tool list; a failure is logged (by list) and the
// last list kept.
func (u *upstream) relist(ctx context.Context) {
	_, _ = u.list(ctx)
}

func (u *upstream) snapshot() []Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tools
}

func (u *upstream) current() (*mcp.ClientSession, *watchConn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sess, u.conn
}

// list does tools/list on the current session and keeps the result.
func (u *upstream) list(ctx context.Context) ([]Tool, error) {
	cs, _ := u.current()
	if cs == nil {
		u.mu.Lock()
		defer u.mu.Unlock()
		return nil, u.unavailableLocked()
	}
	tools, err := u.listOn(ctx, cs, false)
	if err != nil {
		return nil, u.unavailable("tools/list", err)
	}
	return tools, nil
}

// listOn does tools/list (every page, at most MaxTools tools) on cs and
// keeps the result if cs is still the session (or initial: about to be).
func (u *upstream) listOn(ctx context.Context, cs *mcp.ClientSession, initial bool) ([]Tool, error) {
	u.listMu.Lock()
	defer u.listMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, u.spec.Timeout)
	defer cancel()
	var defs []*mcp.Tool
	params := &mcp.ListToolsParams{}
	seen := map[string]bool{}
	for page := 0; ; page++ {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, t := range res.Tools {
			if t == nil || seen[t.Name] {
				continue
			}
			if len(defs) == MaxTools {
				u.log.Warn("upstream lists more tools than kept; the rest are dropped", "max", MaxTools)
				break
			}
			if b, err := json.Marshal(t); err != nil || len(b) > MaxToolBytes {
				u.log.Warn("upstream tool definition dropped: larger than allowed", "bytes", len(b), "max", MaxToolBytes)
				continue
			}
			seen[t.Name] = true
			defs = append(defs, t)
		}
		if res.NextCursor == "" || len(defs) == MaxTools {
			break
		}
		if page+1 == maxListPages {
			u.log.Warn("upstream tools/list has too many pages; the rest are dropped", "pages", maxListPages)
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	tools := make([]Tool, len(defs))
	for i, d := range defs {
		tools[i] = u.classify(d)
	}
	u.mu.Lock()
	if initial || u.sess == cs {
		u.tools, u.listedAt = tools, time.Now()
	}
	u.mu.Unlock()
	return tools, nil
}

// classify makes a listed definition a Tool: hide, then pass, else guarded.
func (u *upstream) classify(d *mcp.Tool) Tool {
	t := Tool{Upstream: u.spec.Name, Name: d.Name, Class: Guarded, SHA256: ToolSHA256(d), Def: d}
	switch {
	case slices.Contains(u.spec.Hide, d.Name):
		t.Class = Hidden
	case slices.Contains(u.spec.Pass, d.Name):
		t.Class = Pass
	}
	t.Exposed, t.Why = ExposedName(u.spec.Name, d.Name)
	return t
}

// ExposedName is NAME__TOOL, or "" and why it cannot be offered.
func ExposedName(upstream, tool string) (string, string) {
	name := upstream + "__" + tool
	for _, r := range tool {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return "", "the tool's name uses characters other than [A-Za-z0-9_-]"
		}
	}
	if tool == "" {
		return "", "the tool has no name"
	}
	if len(name) > MaxExposedName {
		return "", fmt.Sprintf("%s__TOOL would be %d characters, more than %d", upstream, len(name), MaxExposedName)
	}
	return name, ""
}

// callMark follows one tools/call through the transport: whether it was
// written, and (stdio) its raw response.
type callMark struct {
	sent   atomic.Bool
	mu     sync.Mutex
	raw    json.RawMessage
	rpcErr error
}

type markKey struct{}

func markOf(ctx context.Context) *callMark {
	m, _ := ctx.Value(markKey{}).(*callMark)
	return m
}

func (u *upstream) call(ctx context.Context, tool string, args json.RawMessage, meta map[string]any) (*Result, error) {
	cs, _ := u.current()
	if cs == nil {
		u.mu.Lock()
		defer u.mu.Unlock()
		return nil, u.unavailableLocked()
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	m := &callMark{}
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, markKey{}, m), u.spec.Timeout)
	defer cancel()
	// The SDK adds its own members to _meta: give it a copy.
	params := &mcp.CallToolParams{Name: tool, Arguments: args, Meta: maps.Clone(meta)}
	res, err := cs.CallTool(cctx, params)

	m.mu.Lock()
	raw, rpcErr := m.raw, m.rpcErr
	m.mu.Unlock()
	if raw != nil {
		// The answer as received (stdio), even if the SDK refused it.
		return bound(raw, u.spec.MaxResultBytes), nil
	}
	// A JSON-RPC error the upstream answered with. Over stdio the
	// connection saw it arrive; over HTTP, the SDK's own errors (client or
	// server closing, rejected by transport) are told apart by their codes.
	var wire *jsonrpc.Error
	if rpcErr == nil && u.spec.URL != "" && errors.As(err, &wire) && !localCode(wire.Code) {
		rpcErr = wire
	}
	if rpcErr != nil {
		msg := rpcErr.Error()
		if errors.As(rpcErr, &wire) {
			msg = wire.Message
		}
		return errorResult(msg, u.spec.MaxResultBytes), nil
	}
	if err == nil {
		b, merr := json.Marshal(res)
		if merr != nil {
			return nil, fmt.Errorf("%w: upstream %s: tools/call %s: result: %w", ErrOutcomeUnknown, u.spec.Name, tool, merr)
		}
		return bound(b, u.spec.MaxResultBytes), nil
	}
	if !m.sent.Load() {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, u.unavailable("tools/call (not sent)", err)
	}
	return nil, fmt.Errorf("%w: upstream %s: tools/call %s: %s", ErrOutcomeUnknown, u.spec.Name, tool, u.reason(err.Error()))
}

// localCode says a JSON-RPC error code is one the SDK makes itself
// (client closing, server closing, rejected by transport).
func localCode(code int64) bool {
	return code == -32003 || code == -32004 || code == -32005
}

// bound makes a received result a Result, cut at max.
func bound(raw []byte, max int64) *Result {
	sum := sha256.Sum256(raw)
	r := &Result{Bytes: len(raw), SHA256: hex.EncodeToString(sum[:])}
	var wire struct {
		Content    json.RawMessage `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	_ = json.Unmarshal(raw, &wire)
	r.IsError = wire.IsError
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(wire.Content, &items)
	var texts []string
	for _, it := range items {
		if it.Type == "text" {
			texts = append(texts, it.Text)
		}
	}
	r.Text = cutUTF8(strings.Join(texts, "\n"), int(max))
	if int64(len(raw)) <= max {
		if len(wire.Content) > 0 && string(wire.Content) != "null" {
			r.Content = slices.Clone(wire.Content)
		} else {
			r.Content = json.RawMessage(`[]`)
		}
		if len(wire.Structured) > 0 && string(wire.Structured) != "null" {
			r.Structured = slices.Clone(wire.Structured)
		}
		return r
	}
	r.Cut = true
	head := r.Text
	if head == "" {
		head = string(raw)
	}
	r.Content = headContent(head, max)
	return r
}

// headContent is one text item holding the head of s, its JSON at most max bytes.
func headContent(s string, max int64) json.RawMessage {
	n := int(max) - 64
	for n > 0 {
		b, _ := json.Marshal([]map[string]string{{"type": "text", "text": cutUTF8(s, n)}})
		if int64(len(b)) <= max {
			return b
		}
		n -= len(b) - int(max) + 64
	}
	return json.RawMessage(`[]`)
}

func errorResult(msg string, max int64) *Result {
	content, _ := json.Marshal([]map[string]string{{"type": "text", "text": cutUTF8(msg, int(max))}})
	raw, _ := json.Marshal(map[string]any{"content": json.RawMessage(content), "isError": true})
	return bound(raw, max)
}

// cutUTF8 cuts s to at most n bytes, not inside a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	i := n
	for i > 0 && i > n-4 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i]
}
