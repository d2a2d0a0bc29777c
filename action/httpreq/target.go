package httpreq

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

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
