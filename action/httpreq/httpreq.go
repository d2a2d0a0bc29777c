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
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/countersign/countersign/approval"
)

// Name is the action's contract name.
const Name = "http.request"

// Scope is what a principal needs to write to target.
func Scope(target string) string { return Name + ":" + target }

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
