// Package httpreq is the http.request action: a write (POST, PUT, PATCH,
// DELETE) to a configured HTTP target, bound to the state the human saw.
//
// The agent names a target, a method, a path, and optionally a query and a
// JSON body. The URL's scheme and host, and every header (credentials
// included), come from the target's configuration; the agent never sees
// or sets them. Prepare reads the resource (GET on the write's own path),
// snapshots the fields the write depends on, hashes them, and renders a
// field-level diff. Execute reads again and refuses to write if anything
// moved (stale_state), then writes with If-Match on the ETag seen at
// prepare, so a change landing between the re-read and the write is
// refused by the target too (precondition_failed). Every write carries
// Idempotency-Key: <operation key> and its countersignature receipt in
// Countersign-Receipt, which the target can verify (package receipt).
package httpreq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/jsonx"
)

// Name is the action's contract name.
const Name = "http.request"

// Scope is what a principal needs to write to target.
func Scope(target string) string { return Name + ":" + target }

// Target is one configured HTTP target.
type Target struct {
	Name string
	// BaseURL is where every path is appended ("https://host/api").
	BaseURL string
	// Headers are sent with every request, credentials included (already
	// resolved from the environment). They never leave this package.
	Headers map[string]string
	// Allow lists the methods and path patterns agents may use.
	Allow []Rule
	// StateFields are the fields every write to the target binds to, in
	// addition to those the write itself sets (dotted for nested fields).
	StateFields []string
	// NoRead turns the state read off: writes are then not state-bound.
	NoRead bool
	// AllowPrivate lets the target resolve to loopback and private
	// addresses; otherwise they are refused when dialing.
	AllowPrivate bool
	// Timeout bounds each request (default 15s).
	Timeout time.Duration
	// MaxBodyBytes bounds the canonical JSON body (default 64 KiB).
	MaxBodyBytes int
	// Retry, when set, resends a write the target refused with 429 or 503
	// (retry.go); nil: never.
	Retry *Retry
}

// Rule allows one method on the paths matching a pattern: literal
// segments, "*" for one whole segment, and a final "**" for one or more.
// Query lists the query parameter names the rule accepts; a request with
// any other parameter is refused (query_not_allowed). A parameter can
// change what a write does ("_method=DELETE", "force=true"), so none is
// accepted unless a rule names it.
type Rule struct {
	Method string
	Path   string
	Query  []string
}

// Defaults and bounds.
const (
	DefaultTimeout      = 15 * time.Second
	DefaultMaxBodyBytes = 64 << 10
	// maxStateBytes bounds a resource read for its state.
	maxStateBytes = 512 << 10
	// ResultBodyBytes is how much of a response body a result keeps.
	ResultBodyBytes = 4 << 10
	// errorBodyBytes is how much of an error response an error shows.
	errorBodyBytes = 1 << 10
)

// reserved headers are countersign's own, or frame and route the request.
var reserved = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Te", "Trailer", "Upgrade",
	"If-Match", "If-None-Match", "If-Unmodified-Since", "Idempotency-Key", "Expect", ReceiptHeader}

// ReceiptHeader carries the write's countersignature receipt (SPEC §9).
const ReceiptHeader = "Countersign-Receipt"

type target struct {
	Target
	base     *url.URL
	rules    []rule
	headers  map[string]string
	read     *http.Client
	write    *http.Client
	timeout  time.Duration
	maxBody  int
	redactor redactor
	// readers holds a slot for each state read of a bulk in flight.
	readers chan struct{}
}

type rule struct {
	method  string
	pattern pattern
	raw     string
	query   []string
}

// Action is http.request over a set of targets. It is safe for concurrent
// use.
type Action struct {
	targets map[string]*target
	names   []string
}

var (
	_ approval.Action    = (*Action)(nil)
	_ approval.Rechecker = (*Action)(nil)
	_ approval.Undoer    = (*Action)(nil)
)

// New checks the targets and builds the action. An error names the target
// and the problem, never a header value.
func New(targets []Target) (*Action, error) {
	a := &Action{targets: map[string]*target{}}
	for _, t := range targets {
		if t.Name == "" {
			return nil, errors.New("httpreq: a target needs a name")
		}
		if _, dup := a.targets[t.Name]; dup {
			return nil, fmt.Errorf("httpreq: target %s is defined twice", t.Name)
		}
		u, err := url.Parse(t.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("httpreq: target %s: base URL must be an absolute http(s) URL without credentials, query or fragment", t.Name)
		}
		u.Path = strings.TrimRight(u.Path, "/")
		u.RawPath = strings.TrimRight(u.RawPath, "/")
		if err := CheckRetry(t.Retry); err != nil {
			return nil, fmt.Errorf("httpreq: target %s: %w", t.Name, err)
		}
		tt := &target{Target: t, base: u, headers: map[string]string{}, timeout: t.Timeout, maxBody: t.MaxBodyBytes}
		if tt.timeout <= 0 {
			tt.timeout = DefaultTimeout
		}
		if tt.maxBody <= 0 {
			tt.maxBody = DefaultMaxBodyBytes
		}
		for k, v := range t.Headers {
			if strings.ContainsAny(k+v, "\r\n") {
				return nil, fmt.Errorf("httpreq: target %s: header %s has a line break", t.Name, k)
			}
			ck := http.CanonicalHeaderKey(k)
			if slices.Contains(reserved, ck) {
				return nil, fmt.Errorf("httpreq: target %s: header %s is set by countersign", t.Name, k)
			}
			tt.headers[ck] = v
		}
		if len(t.Allow) == 0 {
			return nil, fmt.Errorf("httpreq: target %s allows nothing", t.Name)
		}
		for _, r := range t.Allow {
			m := strings.ToUpper(r.Method)
			if !isWrite(m) {
				return nil, fmt.Errorf("httpreq: target %s: method %q is not a write (POST, PUT, PATCH, DELETE)", t.Name, r.Method)
			}
			if !strings.HasPrefix(r.Path, "/") {
				return nil, fmt.Errorf("httpreq: target %s: path pattern %q must start with /", t.Name, r.Path)
			}
			for _, q := range r.Query {
				if !queryName.MatchString(q) {
					return nil, fmt.Errorf("httpreq: target %s: query parameter name %q must be letters, digits and _ . - [ ]", t.Name, q)
				}
			}
			tt.rules = append(tt.rules, rule{method: m, pattern: parsePattern(r.Path), raw: r.Path, query: slices.Clone(r.Query)})
		}
		tt.redactor = newRedactor(t.Headers)
		tt.readers = make(chan struct{}, bulkReaders)
		tt.read = newClient(t.AllowPrivate, false, tt.timeout)
		tt.write = newClient(t.AllowPrivate, true, tt.timeout)
		a.targets[t.Name] = tt
		a.names = append(a.names, t.Name)
	}
	slices.Sort(a.names)
	return a, nil
}

// Close releases idle connections.
func (a *Action) Close() {
	for _, t := range a.targets {
		t.read.CloseIdleConnections()
		t.write.CloseIdleConnections()
	}
}

// Name implements approval.Action.
func (a *Action) Name() string { return Name }

// Targets lists the configured target names.
func (a *Action) Targets() []string { return slices.Clone(a.names) }

// url is the target URL of a request: the base URL plus the normalized
// path, plus the query. Nothing of the agent's input can change the
// scheme, host or port.
func (t *target) url(r *Request) string {
	u := *t.base
	u.Path = t.base.Path + pathUnescaped(r.segs)
	u.RawPath = t.base.EscapedPath() + r.Path
	if r.Path == "/" && t.base.Path != "" {
		u.Path, u.RawPath = t.base.Path+"/", t.base.EscapedPath()+"/"
	}
	if len(r.Query) > 0 {
		u.RawQuery = url.Values(r.Query).Encode()
	}
	return u.String()
}

func pathUnescaped(segs []string) string {
	if len(segs) == 0 {
		return "/"
	}
	return "/" + strings.Join(segs, "/")
}

// check applies the target's allow-list. Returns policy_denied with
// details.rule method_not_allowed, path_not_allowed or query_not_allowed.
func (t *target) check(r *Request) error {
	if !isWrite(r.Method) {
		e := approval.PolicyDenied("method_not_allowed", "http.request sends writes (POST, PUT, PATCH, DELETE), not %s; reads need no approval", r.Method)
		e.Details["method"] = r.Method
		return e
	}
	var methods []string
	var matched *rule
	for i, ru := range t.rules {
		if ru.method == r.Method && ru.pattern.match(r.segs) {
			if ru.allowsQuery(r.Query) {
				return nil
			}
			if matched == nil {
				matched = &t.rules[i]
			}
		}
		if !slices.Contains(methods, ru.method) {
			methods = append(methods, ru.method)
		}
	}
	if matched != nil {
		var extra []string
		for _, k := range sortedKeys(r.Query) {
			if !slices.Contains(matched.query, k) {
				extra = append(extra, k)
			}
		}
		allowed := "no query parameters"
		if len(matched.query) > 0 {
			allowed = "only " + strings.Join(matched.query, ", ")
		}
		e := approval.PolicyDenied("query_not_allowed", "target %s allows %s on %s %s, not %s",
			t.Name, allowed, r.Method, matched.raw, strings.Join(extra, ", "))
		e.Details["not_allowed"] = extra
		e.Details["allowed_query"] = slices.Clone(matched.query)
		e.Details["fields"] = []approval.FieldError{{Field: "query." + extra[0], Reason: "not a query parameter the target's rule lists"}}
		return e
	}
	var paths []string
	for _, ru := range t.rules {
		if ru.method == r.Method {
			paths = append(paths, ru.raw)
		}
	}
	if len(paths) == 0 {
		e := approval.PolicyDenied("method_not_allowed", "target %s does not allow %s (allowed: %s)", t.Name, r.Method, strings.Join(methods, ", "))
		e.Details["allowed_methods"] = methods
		return e
	}
	e := approval.PolicyDenied("path_not_allowed", "target %s does not allow %s %s (allowed paths: %s)", t.Name, r.Method, r.Path, strings.Join(paths, ", "))
	e.Details["allowed_paths"] = paths
	return e
}

// allowsQuery reports whether the rule lists every parameter of q.
func (ru rule) allowsQuery(q map[string][]string) bool {
	for k := range q {
		if !slices.Contains(ru.query, k) {
			return false
		}
	}
	return true
}

// bound reports whether writes of method are bound to the resource's state.
func (t *target) bound(method string) bool {
	return !t.NoRead && method != http.MethodPost
}

// resolve parses input and finds its target, applying every check that
// needs no network. who may be nil (no scope check).
func (a *Action) resolve(raw json.RawMessage, who *approval.Principal) (*Request, *target, error) {
	r, err := parseRequest(raw)
	if err != nil {
		return nil, nil, err
	}
	t, ok := a.targets[r.Target]
	if !ok {
		e := approval.PolicyDenied("target_not_allowed", "no target named %q is configured (targets: %s)", r.Target, strings.Join(a.names, ", "))
		e.Details["targets"] = a.Targets()
		return nil, nil, e
	}
	// Refuse before any request reaches the target: without the scope the
	// principal may not even cause a read with the target's credentials.
	if who != nil && !who.Allows(Scope(t.Name)) {
		return nil, nil, approval.Errorf(approval.CodeInsufficientScope, "principal %s may not prepare %s", who.ID, Scope(t.Name)).
			WithDetails(map[string]any{"scope": Scope(t.Name)})
	}
	check := t.checkOne
	if r.bulk() {
		check = t.checkItems
	}
	if err := check(r); err != nil {
		return nil, nil, err
	}
	return r, t, nil
}

// checkOne applies the target's rules to one write: the allow-list, the
// body limit, and the shape of the body. Returns policy_denied or
// invalid_input.
func (t *target) checkOne(r *Request) error {
	if err := t.check(r); err != nil {
		return err
	}
	if len(r.Body) > t.maxBody {
		e := approval.PolicyDenied("max_body_bytes", "the body is %d bytes; target %s accepts at most %d", len(r.Body), t.Name, t.maxBody)
		e.Details["limit"] = t.maxBody
		return e
	}
	if len(r.Body) > 0 {
		body, _ := decodeJSON(r.Body)
		// Attrs, the diff and the state binding spell every field as its
		// whole dotted path; keep what they add up to linear in the body.
		if limit := maxFieldPathBytes(len(r.Body)); fieldPathBytes(body, 0, limit) > limit {
			e := approval.FieldErrors{{Field: "body", Reason: fmt.Sprintf(
				"its fields' dotted paths add up to more than %d bytes (2 × the body + 16 KiB): nest less deeply, use shorter names, or send fewer fields", limit)}}.Err().(*approval.Error)
			e.Details["rule"] = "max_field_paths"
			return e
		}
		if r.Method == http.MethodPatch || r.Method == http.MethodPut {
			if r.Body[0] != '{' {
				return approval.FieldErrors{{Field: "body", Reason: r.Method + " needs a JSON object body"}}.Err()
			}
			if err := checkKeys(body, ""); err != nil {
				return approval.FieldErrors{{Field: "body", Reason: err.Error()}}.Err()
			}
		}
	} else if r.Method == http.MethodPatch || r.Method == http.MethodPut {
		return approval.FieldErrors{{Field: "body", Reason: r.Method + " needs a JSON object body"}}.Err()
	}
	return nil
}

// read is the state read: GET on the request's own path.
type read struct {
	doc  any
	etag string
	gone bool
}

// readState GETs the resource. A 404 or 410 is reported as gone; any
// other failure is an error whose text is safe to show.
func (a *Action) readState(ctx context.Context, t *target, r *Request) (*read, *readError) {
	get := &Request{Target: r.Target, Method: http.MethodGet, Path: r.Path, Query: r.Query, segs: r.segs}
	res := a.do(ctx, t, http.MethodGet, t.url(get), nil, http.Header{"Accept": {"application/json"}}, maxStateBytes)
	if res.err != nil {
		rule := "state_read_failed"
		if isPrivate(res.err) {
			rule = "private_address"
		}
		return nil, &readError{rule: rule, msg: describe(res.err)}
	}
	resp := res.resp
	switch {
	case resp.status == http.StatusNotFound || resp.status == http.StatusGone:
		return &read{gone: true}, nil
	case resp.status >= 300 && resp.status < 400:
		return nil, &readError{rule: "redirect", status: resp.status,
			msg: fmt.Sprintf("the target answered the state read with a redirect (%s); countersign never follows redirects", statusText(resp.status))}
	case resp.status < 200 || resp.status >= 300:
		return nil, &readError{rule: "state_read_failed", status: resp.status,
			msg: fmt.Sprintf("the target answered the state read with %s", statusText(resp.status))}
	case resp.truncated:
		return nil, &readError{rule: "state_too_large", status: resp.status,
			msg: fmt.Sprintf("the resource is larger than %d bytes", maxStateBytes)}
	}
	if approval.CheckJSONDepth(resp.body, "") != nil {
		return nil, &readError{rule: "state_too_deep", status: resp.status,
			msg: fmt.Sprintf("the resource nests deeper than %d levels, so its state cannot be bound", approval.MaxJSONDepth)}
	}
	doc, err := decodeJSON(t.redactor.bytes(resp.body))
	if _, isObj := doc.(map[string]any); err != nil || !isObj {
		return nil, &readError{rule: "state_not_json", status: resp.status,
			msg: "the resource at this path is not a JSON object, so its state cannot be bound"}
	}
	return &read{doc: doc, etag: strongETag(resp.header)}, nil
}

type readError struct {
	rule   string
	status int
	msg    string
}

// prepareError maps a failed state read at prepare to a coded error:
// private addresses and redirects are policy_denied, a 4xx answer is
// invalid_input, and a target that cannot be reached or fails (5xx) is
// unavailable (nothing was stored; try again later).
func (e *readError) prepareError() error {
	details := map[string]any{"rule": e.rule}
	if e.status != 0 {
		details["status"] = e.status
	}
	switch {
	case e.rule == "private_address" || e.rule == "redirect":
		return &approval.Error{Code: approval.CodePolicyDenied, Message: e.msg, Details: details}
	case e.status >= 400 && e.status < 500, e.rule == "state_not_json", e.rule == "state_too_large", e.rule == "state_too_deep":
		details["fields"] = []approval.FieldError{{Field: "path", Reason: e.msg}}
		return &approval.Error{Code: approval.CodeInvalidInput, Message: "path: " + e.msg, Details: details}
	}
	return &approval.Error{Code: approval.CodeUnavailable, Message: e.msg + "; nothing was stored, try again later", Details: details}
}

// Prepare implements approval.Action: it validates, reads the resource,
// binds the operation to its state and renders the diff. It never writes.
//
// Returns invalid_input (details.fields, and details.rule for refused
// paths), insufficient_scope, policy_denied (details.rule:
// target_not_allowed, method_not_allowed, path_not_allowed,
// max_body_bytes, private_address, redirect), or unavailable when the
// target cannot be read.
func (a *Action) Prepare(ctx context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	r, t, err := a.resolve(req.Input, req.Principal)
	if err != nil {
		return nil, err
	}
	if r.bulk() {
		return a.prepareBulk(ctx, req, r, t)
	}
	p := &approval.Prepared{Input: r, Scope: Scope(t.Name), Attrs: r.Attrs()}
	var pl plan
	if t.bound(r.Method) {
		rd, rerr := a.readState(ctx, t, r)
		if rerr != nil {
			return nil, rerr.prepareError()
		}
		if rd.gone {
			return nil, &approval.Error{Code: approval.CodeInvalidInput,
				Message: fmt.Sprintf("path: target %s has no resource at %s (the state read found nothing); check the path", t.Name, r.Path),
				Details: map[string]any{"rule": "resource_not_found", "fields": []approval.FieldError{{Field: "path", Reason: "no resource at this path"}}}}
		}
		var body any
		if len(r.Body) > 0 {
			body, _ = decodeJSON(r.Body)
		}
		pl = planWrite(r.Method, t.StateFields, body, rd.doc)
		snap := take(rd.doc, pl.fields)
		p.State = &approval.StateBinding{Hash: snap.hash(), Snapshot: snap.raw(), ETag: rd.etag}
	}
	p.Preview = a.preview(t, r, pl, p.State)
	return p, nil
}

// preview renders the request for humans and the agent.
func (a *Action) preview(t *target, r *Request, pl plan, st *approval.StateBinding) approval.Preview {
	u := t.url(r)
	pv := approval.Preview{
		Title: fmt.Sprintf("%s %s on %s", r.Method, r.Path, t.Name),
		Fields: []approval.Field{
			{Name: "target", Label: "Target", Value: t.Name},
			{Name: "method", Label: "Method", Value: r.Method},
			{Name: "url", Label: "URL", Value: u},
		},
		Diff: pl.diff,
	}
	if len(r.Body) > 0 {
		// Indented when that at most doubles it: a wide, deep body would
		// grow by its depth in spaces on every line.
		label, text := "Body (JSON)", r.Body
		if ind, ok := jsonx.IndentBounded(r.Body, 2*len(r.Body)+4<<10); ok {
			text = ind
		} else {
			label = "Body (JSON, compact: indented it would be more than twice as long)"
		}
		pv.Fields = append(pv.Fields, approval.Field{Name: "body", Label: label, Value: string(text), Long: true})
	}
	switch {
	case r.Method == http.MethodDelete:
		pv.Summary = fmt.Sprintf("Deletes %s on %s.", r.Path, t.Name)
	case r.Method == http.MethodPost:
		pv.Summary = fmt.Sprintf("Sends a POST to %s on %s.", r.Path, t.Name)
	default:
		pv.Summary = fmt.Sprintf("Changes %d field(s) of %s on %s.", len(pl.diff), r.Path, t.Name)
	}
	if r.Method == http.MethodDelete || r.Method == http.MethodPost {
		pv.Warnings = append(pv.Warnings, "irreversible")
	}
	switch {
	case st == nil:
		pv.Warnings = append(pv.Warnings, "not_state_bound")
		pv.Summary += " It is not checked against the resource's current state before it runs."
	case st.ETag == "":
		pv.Warnings = append(pv.Warnings, "no_etag")
		pv.Summary += " It is checked against the state shown here right before it runs; the target gives no ETag, so a change in the last instant cannot be refused by the target."
	default:
		pv.Summary += " It runs only if the resource is still as shown here (checked again, and If-Match " + st.ETag + ")."
	}
	if pl.truncated {
		pv.Warnings = append(pv.Warnings, "diff_truncated")
	}
	return pv
}

// stale is the stale_state error of an operation whose resource moved:
// what changed, and the current values (error.details).
func stale(prev *snapshot, rd *read, prevETag string) *approval.ExecError {
	if rd.gone {
		return &approval.ExecError{Code: approval.CodeStaleState,
			Message: "the resource no longer exists on the target; nothing was written. Prepare again if it is still needed.",
			Details: map[string]any{"reason": "gone", "current": nil}}
	}
	now := take(rd.doc, prev.Fields)
	changed := prev.changes(now)
	d := map[string]any{"reason": "changed", "current": now.Values, "changed": changed, "state_hash": now.hash()}
	msg := fmt.Sprintf("the resource changed since it was prepared (%s); nothing was written. Prepare again so the human sees the current state.", fieldList(changed))
	if len(changed) == 0 {
		d["reason"] = "etag_changed"
		d["etag"] = rd.etag
		msg = "the resource was modified since it was prepared (its ETag changed from " + prevETag + " to " + rd.etag +
			"), so the target would refuse the write; nothing was written. Prepare again."
	}
	return &approval.ExecError{Code: approval.CodeStaleState, Message: msg, Details: d}
}

func fieldList(cs []approval.Change) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Field)
	}
	if len(names) > 5 {
		names = append(names[:5], fmt.Sprintf("and %d more", len(names)-5))
	}
	return strings.Join(names, ", ")
}

// verify re-reads the resource of a state-bound operation and compares it
// with the binding. It returns a *ExecError with stale_state when the
// state moved (or the resource is gone, or its strong ETag changed), and a
// *readError when the target could not be read.
func (a *Action) verify(ctx context.Context, t *target, r *Request, st *approval.StateBinding) (*snapshot, error) {
	prev, err := decodeSnapshot(st.Snapshot)
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "the stored state binding is unreadable; nothing was written"}
	}
	rd, rerr := a.readState(ctx, t, r)
	if rerr != nil {
		return nil, rerr
	}
	if rd.gone {
		return nil, stale(prev, rd, st.ETag)
	}
	now := take(rd.doc, prev.Fields)
	if now.hash() != st.Hash || (st.ETag != "" && rd.etag != st.ETag) {
		return nil, stale(prev, rd, st.ETag)
	}
	return prev, nil
}

func (e *readError) Error() string { return e.msg }

// Recheck implements approval.Rechecker: the approval page calls it when
// it renders. It returns a *ExecError with stale_state when the resource
// moved since prepare, nil when it did not (or the operation is not bound
// to state), and another error when the target cannot be read now.
func (a *Action) Recheck(ctx context.Context, op *approval.Operation) error {
	if op.State == nil {
		return nil
	}
	r, t, err := a.stored(op)
	if err != nil {
		return err
	}
	if r.bulk() {
		_, _, err = a.verifyItems(ctx, t, r, op.State, "they were prepared")
		return err
	}
	_, err = a.verify(ctx, t, r, op.State)
	return err
}

// stored reads an operation's request back and checks it against the
// target as configured now (a target removed or narrowed since prepare
// refuses the operation).
func (a *Action) stored(op *approval.Operation) (*Request, *target, error) {
	r, err := decodeStored(op.Input)
	if err != nil {
		return nil, nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "the stored input is unreadable; nothing was sent"}
	}
	t, ok := a.targets[r.Target]
	if !ok {
		return nil, nil, &approval.ExecError{Code: approval.CodeExecutionFailed,
			Message: "target " + r.Target + " is no longer configured; nothing was sent", Details: map[string]any{"rule": "target_not_allowed"}}
	}
	if err := t.allows(r); err != nil {
		var ce *approval.Error
		errors.As(err, &ce)
		return nil, nil, &approval.ExecError{Code: approval.CodeExecutionFailed,
			Message: "the target no longer allows this request: " + ce.Message + "; nothing was sent", Details: ce.Details}
	}
	return r, t, nil
}

// allows checks a stored request, or every item of a stored bulk, against
// the target's allow-list as configured now.
func (t *target) allows(r *Request) error {
	if !r.bulk() {
		return t.check(r)
	}
	for i, it := range r.Items {
		if err := t.check(it); err != nil {
			return atItem(err, i)
		}
	}
	return nil
}
