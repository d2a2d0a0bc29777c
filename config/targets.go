package config

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// TargetSpec is an HTTP target for http.request (docs/http-targets.md).
type TargetSpec struct {
	Name    string `yaml:"name"`
	BaseURL string `yaml:"base_url"`
	// Headers are sent with every request to the target. Values carrying
	// credentials are ${ENV_VAR} references; the agent never sees them.
	Headers map[string]string `yaml:"headers"`
	Allow   []AllowSpec       `yaml:"allow"`
	State   StateSpec         `yaml:"state"`
	// AllowPrivate lets the target resolve to loopback or private
	// addresses (internal APIs, tests); off, such addresses are refused.
	AllowPrivate *bool `yaml:"allow_private"`
	// Timeout bounds each request to the target (default 15s, 1s–2m).
	Timeout Duration `yaml:"timeout"`
	// MaxBodyBytes caps the JSON body an agent may send (default 64 KiB,
	// at most 1 MiB).
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// Retry opts in to resending a write the target refused with 429 or
	// 503, with the same Idempotency-Key: for targets that dedupe by it.
	// The one exception to "never retried automatically"
	// (docs/http-targets.md).
	Retry *RetrySpec `yaml:"retry"`
}

// RetrySpec is a target's bounded retry: on lists the statuses (429, 503),
// max the further attempts (1–5).
type RetrySpec struct {
	On  []int `yaml:"on"`
	Max int   `yaml:"max"`
}

// AllowSpec is one allowed method and path pattern. In a pattern, "*" is
// exactly one path segment and a final "**" one or more; everything else
// matches literally.
type AllowSpec struct {
	Method string `yaml:"method"`
	Path   string `yaml:"path"`
	// Query lists the query parameter names the rule accepts; any other
	// parameter is refused (query_not_allowed). Empty: no query at all.
	Query []string `yaml:"query"`
}

// StateSpec lists the fields of the target's resource an operation binds
// to (dotted paths for nested fields, e.g. "time.start"). They are read by
// GET on the write's own path, together with every field the write sets.
type StateSpec struct {
	Fields []string `yaml:"fields"`
	// Read: false turns the GET off for targets whose write paths cannot be
	// read; their writes are then not bound to state (the preview says so).
	Read *bool `yaml:"read"`
}

// Private reports whether the target may resolve to private addresses.
func (t TargetSpec) Private() bool { return t.AllowPrivate != nil && *t.AllowPrivate }

// Reads reports whether writes to the target are bound to state.
func (t TargetSpec) Reads() bool { return t.State.Read == nil || *t.State.Read }

// ResolveHeaders expands the ${ENV_VAR} references of the target's
// headers. A reference to an unset variable is an error naming the header
// and the variable, never a value.
func (t TargetSpec) ResolveHeaders(lookup func(string) (string, bool)) (map[string]string, error) {
	out := make(map[string]string, len(t.Headers))
	for _, k := range slices.Sorted(maps.Keys(t.Headers)) {
		v, err := Expand(t.Headers[k], lookup)
		if err != nil {
			return nil, fmt.Errorf("target %s: header %s: %w", t.Name, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// Methods a target may allow: http.request is for writes (a read needs no
// approval).
var targetMethods = []string{"POST", "PUT", "PATCH", "DELETE"}

// Headers countersign sets itself, or that would change how a request is
// framed or routed; a target may not set them.
var reservedHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "te", "trailer",
	"upgrade", "if-match", "if-none-match", "if-unmodified-since", "idempotency-key", "expect", "countersign-receipt"}

// credentialHeader reports whether a header name suggests a credential,
// whose value must then come from the environment.
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	if n == "authorization" || n == "proxy-authorization" || n == "cookie" {
		return true
	}
	for _, w := range []string{"auth", "token", "key", "secret", "password", "signature", "session"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

var (
	headerName   = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`)
	fieldPattern = regexp.MustCompile(`^[^.\s]+(\.[^.\s]+)*$`)
	// queryParamName is httpreq's rule for query parameter names.
	queryParamName = regexp.MustCompile(`^[A-Za-z0-9_.\-\[\]]{1,128}$`)
)

func (f *File) validateTargets(bad func(string, ...any)) {
	seen := map[string]bool{}
	for i, t := range f.Targets {
		name := namedEntry(bad, "targets", i, t.Name, idPattern, "lowercase letters, digits, '_', '.', '-'", seen)
		u, err := url.Parse(t.BaseURL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
			bad("target %s: base_url %q must be an absolute http(s) URL", name, t.BaseURL)
		case u.User != nil:
			bad("target %s: base_url must not carry credentials; put them in headers as ${ENV_VAR}", name)
		case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(t.BaseURL, "?"):
			bad("target %s: base_url must not have a query or fragment (credentials in URLs end up in logs; use headers)", name)
		case u.Scheme == "http" && !t.Private():
			bad("target %s: base_url must be https (plain http is allowed only with allow_private: true, for internal targets)", name)
		case envRef.MatchString(t.BaseURL):
			bad("target %s: base_url cannot use ${ENV_VAR} references", name)
		}
		checkHeaders("target "+name, t.Headers, reservedHeaders, bad)
		if len(t.Allow) == 0 {
			bad("target %s: allow must list at least one {method, path}", name)
		}
		for j, a := range t.Allow {
			if !slices.Contains(targetMethods, a.Method) {
				bad("target %s: allow[%d]: method %q must be one of %s", name, j, a.Method, strings.Join(targetMethods, ", "))
			}
			if err := CheckPathPattern(a.Path); err != nil {
				bad("target %s: allow[%d]: %v", name, j, err)
			}
			for k, q := range a.Query {
				if !queryParamName.MatchString(q) {
					bad("target %s: allow[%d]: query parameter name %q must be 1-128 of letters, digits and _ . - [ ]", name, j, q)
				}
				if slices.Contains(a.Query[:k], q) {
					bad("target %s: allow[%d]: query parameter %q is listed twice", name, j, q)
				}
			}
		}
		fields := map[string]bool{}
		for _, fl := range t.State.Fields {
			if !fieldPattern.MatchString(fl) {
				bad("target %s: state field %q must be a name or a dotted path (time.start)", name, fl)
			}
			if fields[fl] {
				bad("target %s: state field %q is listed twice", name, fl)
			}
			fields[fl] = true
		}
		if d := time.Duration(t.Timeout); d != 0 && (d < time.Second || d > 2*time.Minute) {
			bad("target %s: timeout %s must be between 1s and 2m", name, d)
		}
		if t.MaxBodyBytes < 0 || t.MaxBodyBytes > 1<<20 {
			bad("target %s: max_body_bytes must be between 1 and 1048576", name)
		}
		if r := t.Retry; r != nil {
			if len(r.On) == 0 {
				bad("target %s: retry.on must list the statuses to retry (429, 503)", name)
			}
			for k, c := range r.On {
				if c != 429 && c != 503 {
					bad("target %s: retry.on: %d cannot be retried (only 429 and 503, which say the target applied nothing; after 502 or 504 the write may have reached it)", name, c)
				}
				if slices.Contains(r.On[:k], c) {
					bad("target %s: retry.on: %d is listed twice", name, c)
				}
			}
			if r.Max < 1 || r.Max > 5 {
				bad("target %s: retry.max must be between 1 and 5", name)
			}
		}
	}
}

// CheckPathPattern validates an allow-list path pattern: it starts with
// "/", has no empty segments (except a trailing slash), no "." or ".."
// segments and no query; "*" stands for one whole segment and "**", only
// as the last segment, for one or more.
func CheckPathPattern(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path pattern %q must start with /", p)
	}
	if strings.ContainsAny(p, "?#\\%@") {
		return fmt.Errorf("path pattern %q may not contain ?, #, \\, %% or @", p)
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch {
		case s == "" && !(last && i > 0):
			return fmt.Errorf("path pattern %q has an empty segment", p)
		case s == "." || s == "..":
			return fmt.Errorf("path pattern %q has a %q segment", p, s)
		case s == "**" && !last:
			return fmt.Errorf("path pattern %q: ** may only be the last segment", p)
		case s != "*" && s != "**" && strings.Contains(s, "*"):
			return fmt.Errorf("path pattern %q: * stands for a whole segment (/events/*), not part of one", p)
		}
		for _, r := range s {
			if r < 0x21 || r == 0x7f {
				return fmt.Errorf("path pattern %q has a space or control character", p)
			}
		}
	}
	return nil
}

func (f *File) hasTarget(name string) bool {
	for _, t := range f.Targets {
		if t.Name == name {
			return true
		}
	}
	return false
}

// checkHeaders checks the headers a target or an upstream sends (at names
// it in messages): names, none that countersign sets itself (reserved),
// credentials only as ${ENV_VAR} references, no line breaks.
func checkHeaders(at string, headers map[string]string, reserved []string, bad func(string, ...any)) {
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		v := headers[k]
		if !headerName.MatchString(k) {
			bad("%s: %q is not a header name", at, k)
		}
		if slices.Contains(reserved, strings.ToLower(k)) {
			bad("%s: header %s is set by countersign and cannot be configured", at, k)
		}
		if credentialHeader(k) && !envRef.MatchString(v) {
			bad("%s: header %s looks like a credential; its value must be a ${ENV_VAR} reference, never a literal", at, k)
		}
		if strings.ContainsAny(v, "\r\n") {
			bad("%s: header %s has a line break", at, k)
		}
	}
}

// namedEntry checks the name of entry i of a named list (targets,
// upstreams): its pattern (rule says it in words) and that it is unique.
// It returns what messages call the entry: its name, or list[i] when the
// name is not valid.
func namedEntry(bad func(string, ...any), list string, i int, name string, pattern *regexp.Regexp, rule string, seen map[string]bool) string {
	at := name
	if !pattern.MatchString(name) {
		bad("%s[%d]: name %q must be %s", list, i, name, rule)
		at = fmt.Sprintf("%s[%d]", list, i)
	}
	if seen[name] {
		bad("%s[%d]: duplicate name %q", list, i, name)
	}
	seen[name] = true
	return at
}
