package config

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/action/mcpcall"
)

// UpstreamSpec is one MCP server the gateway stands in front of (SPEC §12).
type UpstreamSpec struct {
	Name    string            `yaml:"name"`    // [a-z0-9-]{1,32} (no underscore: NAME__TOOL must split unambiguously)
	Command []string          `yaml:"command"` // stdio; exactly one of command and url
	Env     map[string]string `yaml:"env"`     // stdio; values may hold ${ENV} references
	URL     string            `yaml:"url"`     // streamable HTTP (http or https)
	Headers map[string]string `yaml:"headers"` // HTTP only; values carrying credentials are ${ENV}
	Pass    []string          `yaml:"pass"`
	Hide    []string          `yaml:"hide"`
	// State binds a guarded tool's approval to what a read tool returns,
	// by guarded tool name.
	State          map[string]UpstreamStateSpec `yaml:"state"`
	MaxResultBytes ByteSize                     `yaml:"max_result_bytes"` // default 1 MiB, at most 16 MiB
	PassRate       int                          `yaml:"pass_rate"`        // per minute per principal, default 120, 1..10000
	Timeout        Duration                     `yaml:"timeout"`          // one call, default 60s, 1s..10m
}

// UpstreamStateSpec is the read that a guarded tool's approval is bound to.
type UpstreamStateSpec struct {
	Tool string            `yaml:"tool"` // the read tool
	Args map[string]string `yaml:"args"` // "{arg}" = the guarded call's top-level argument; else a literal
	Diff string            `yaml:"diff"` // the guarded call's argument to line-diff against the read
}

// The limits of an upstream, and their defaults.
const (
	DefaultUpstreamResultBytes = 1 << 20
	MaxUpstreamResultBytes     = 16 << 20
	DefaultUpstreamPassRate    = 120
	MaxUpstreamPassRate        = 10000
	DefaultUpstreamTimeout     = 60 * time.Second
)

var (
	upstreamName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	// mcpToolName is what an upstream may call a tool (MCP's own rule).
	mcpToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	// argName is a top-level argument a state read refers to.
	argName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Headers the MCP client sets itself, or that frame the request; an
// upstream may not set them.
var upstreamReservedHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "te", "trailer",
	"upgrade", "expect", "content-type", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id"}

// ResolveEnv expands the ${ENV} references of env (stdio) and headers
// (HTTP); a reference to an unset variable is an error naming the
// upstream, the key and the variable, never a value.
func (u UpstreamSpec) ResolveEnv(lookup func(string) (string, bool)) (env, headers map[string]string, err error) {
	expand := func(kind string, in map[string]string) (map[string]string, error) {
		if len(in) == 0 {
			return nil, nil
		}
		out := make(map[string]string, len(in))
		for _, k := range slices.Sorted(maps.Keys(in)) {
			v, err := Expand(in[k], lookup)
			if err != nil {
				return nil, fmt.Errorf("upstream %s: %s %s: %w", u.Name, kind, k, err)
			}
			out[k] = v
		}
		return out, nil
	}
	if env, err = expand("env", u.Env); err != nil {
		return nil, nil, err
	}
	if headers, err = expand("header", u.Headers); err != nil {
		return nil, nil, err
	}
	return env, headers, nil
}

// ResultLimit is max_result_bytes, default 1 MiB.
func (u UpstreamSpec) ResultLimit() int64 {
	if u.MaxResultBytes == 0 {
		return DefaultUpstreamResultBytes
	}
	return int64(u.MaxResultBytes)
}

// Rate is pass_rate, pass calls per minute per principal, default 120.
func (u UpstreamSpec) Rate() int {
	if u.PassRate == 0 {
		return DefaultUpstreamPassRate
	}
	return u.PassRate
}

// CallTimeout bounds one call of the upstream, default 60s.
func (u UpstreamSpec) CallTimeout() time.Duration {
	if u.Timeout == 0 {
		return DefaultUpstreamTimeout
	}
	return time.Duration(u.Timeout)
}

// Stdio reports whether serve starts the upstream as a process (command)
// rather than reaching it over streamable HTTP (url).
func (u UpstreamSpec) Stdio() bool { return len(u.Command) > 0 }

// MCPScope reads a scope that allows mcp.call: "mcp:NAME" (every tool of
// the upstream NAME, tool "") or "mcp:NAME/TOOL". ok is false for any other
// scope; the names are not checked against the file.
func MCPScope(scope string) (upstream, tool string, ok bool) {
	rest, ok := strings.CutPrefix(scope, mcpcall.ScopeBase+":")
	if !ok {
		return "", "", false
	}
	upstream, tool, _ = strings.Cut(rest, "/")
	return upstream, tool, true
}

// checkMCPScope checks a scope whose base is mcp's or mcp.call itself.
// handled is false for the scopes of other actions.
func (f *File) checkMCPScope(s string) (handled bool, err error) {
	base, _, _ := strings.Cut(s, ":")
	switch {
	case base == mcpcall.Name:
		return true, fmt.Errorf("scope %q: %s is allowed per upstream: write %s:NAME (every tool of the upstream NAME) or %s:NAME/TOOL", s, mcpcall.Name, mcpcall.ScopeBase, mcpcall.ScopeBase)
	case base != mcpcall.ScopeBase:
		return false, nil
	}
	name, tool, ok := MCPScope(s)
	switch {
	case !ok || name == "":
		return true, fmt.Errorf("scope %q names no upstream: write %s:NAME (every tool of the upstream NAME) or %s:NAME/TOOL", s, mcpcall.ScopeBase, mcpcall.ScopeBase)
	case !f.hasUpstream(name):
		return true, fmt.Errorf("scope %q names no configured upstream", s)
	case strings.Contains(s, "/") && !mcpToolName.MatchString(tool):
		return true, fmt.Errorf("scope %q: tool %q must be 1-128 of letters, digits and _ . -", s, tool)
	}
	return true, nil
}

func (f *File) validateUpstreams(bad func(string, ...any)) {
	seen := map[string]bool{}
	for i, u := range f.Upstreams {
		name := namedEntry(bad, "upstreams", i, u.Name, upstreamName,
			"1-32 lowercase letters, digits and '-' (no '_': tools are offered as NAME__TOOL)", seen)
		at := "upstream " + name
		u.validateTransport(at, bad)
		u.validateTools(at, bad)
		if b := u.MaxResultBytes; b < 0 || b > MaxUpstreamResultBytes {
			bad("%s: max_result_bytes must be at most 16MiB", at)
		}
		if r := u.PassRate; r < 0 || r > MaxUpstreamPassRate {
			bad("%s: pass_rate must be between 1 and %d calls per minute", at, MaxUpstreamPassRate)
		}
		if d := time.Duration(u.Timeout); d != 0 && (d < time.Second || d > 10*time.Minute) {
			bad("%s: timeout %s must be between 1s and 10m", at, d)
		}
	}
}

// validateTransport checks command and env (stdio), or url and headers
// (HTTP). Errors never repeat a header or env value.
func (u UpstreamSpec) validateTransport(at string, bad func(string, ...any)) {
	switch {
	case len(u.Command) > 0 && u.URL != "":
		bad("%s: has both command and url; give one (command for stdio, url for streamable HTTP)", at)
	case len(u.Command) == 0 && u.URL == "":
		bad("%s: needs command (stdio) or url (streamable HTTP)", at)
	case len(u.Command) > 0 && strings.TrimSpace(u.Command[0]) == "":
		bad("%s: command[0] must name the program to start", at)
	}
	for _, a := range u.Command {
		if envRef.MatchString(a) {
			bad("%s: command cannot use ${ENV_VAR} references; pass them in env", at)
			break
		}
	}
	if u.URL != "" {
		p, err := url.Parse(u.URL)
		switch {
		case err != nil || p.Host == "" || (p.Scheme != "https" && p.Scheme != "http"):
			bad("%s: url %q must be an absolute http(s) URL", at, u.URL)
		case p.User != nil:
			bad("%s: url must not carry credentials; put them in headers as ${ENV_VAR}", at)
		case p.RawQuery != "" || p.Fragment != "" || strings.HasSuffix(u.URL, "?"):
			bad("%s: url must not have a query or fragment (credentials in URLs end up in logs; use headers)", at)
		case envRef.MatchString(u.URL):
			bad("%s: url cannot use ${ENV_VAR} references", at)
		}
	}
	if len(u.Headers) > 0 && u.URL == "" {
		bad("%s: headers apply to an upstream reached by url, not by command (use env)", at)
	}
	if len(u.Env) > 0 && len(u.Command) == 0 {
		bad("%s: env applies to an upstream started by command, not reached by url (use headers)", at)
	}
	checkHeaders(at, u.Headers, upstreamReservedHeaders, bad)
	for _, k := range slices.Sorted(maps.Keys(u.Env)) {
		if !envName.MatchString(k) {
			bad("%s: env %q is not a variable name", at, k)
		}
		if credentialHeader(k) && !envRef.MatchString(u.Env[k]) {
			bad("%s: env %s looks like a credential; its value must be a ${ENV_VAR} reference, never a literal", at, k)
		}
		if strings.ContainsRune(u.Env[k], 0) {
			bad("%s: env %s has a NUL byte", at, k)
		}
	}
}

// validateTools checks pass, hide and state: every other tool is guarded,
// so a name in two lists, or a state binding on a tool that is not
// guarded, is a mistake.
func (u UpstreamSpec) validateTools(at string, bad func(string, ...any)) {
	tools := func(list string, names []string) {
		for k, t := range names {
			if !mcpToolName.MatchString(t) {
				bad("%s: %s: tool %q must be 1-128 of letters, digits and _ . -", at, list, t)
			}
			if slices.Contains(names[:k], t) {
				bad("%s: %s: tool %s is listed twice", at, list, t)
			}
		}
	}
	tools("pass", u.Pass)
	tools("hide", u.Hide)
	for _, t := range u.Pass {
		if slices.Contains(u.Hide, t) {
			bad("%s: tool %s is in both pass and hide", at, t)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(u.State)) {
		s := u.State[g]
		switch {
		case !mcpToolName.MatchString(g):
			bad("%s: state: tool %q must be 1-128 of letters, digits and _ . -", at, g)
		case slices.Contains(u.Pass, g):
			bad("%s: state.%s: %s is in pass; state binds the approval of a guarded tool", at, g, g)
		case slices.Contains(u.Hide, g):
			bad("%s: state.%s: %s is in hide; state binds the approval of a guarded tool", at, g, g)
		}
		switch {
		case s.Tool == "":
			bad("%s: state.%s: tool must name the read tool whose result the approval is bound to", at, g)
		case s.Tool == g:
			bad("%s: state.%s: tool must be a read tool, not %s itself", at, g, g)
		case !mcpToolName.MatchString(s.Tool):
			bad("%s: state.%s: tool %q must be 1-128 of letters, digits and _ . -", at, g, s.Tool)
		case !slices.Contains(u.Pass, s.Tool) && !slices.Contains(u.Hide, s.Tool):
			// countersign calls the read tool without approval, at
			// prepare and again before the call: a guarded one would run
			// unapproved.
			bad("%s: state.%s: read tool %s is guarded; list it in pass (or hide), as countersign calls it without approval", at, g, s.Tool)
		}
		for _, k := range slices.Sorted(maps.Keys(s.Args)) {
			v := s.Args[k]
			if !mcpToolName.MatchString(k) {
				bad("%s: state.%s: args: %q is not an argument name", at, g, k)
			}
			if strings.ContainsAny(v, "{}") {
				ref, ok := strings.CutPrefix(v, "{")
				ref, ok2 := strings.CutSuffix(ref, "}")
				if !ok || !ok2 || !argName.MatchString(ref) {
					bad("%s: state.%s: args.%s %q: a template is a whole value \"{name}\" naming a top-level argument of %s (letters, digits, '_')", at, g, k, v, g)
				}
			}
		}
		if s.Diff != "" && !argName.MatchString(s.Diff) {
			bad("%s: state.%s: diff %q must name a top-level argument of %s (letters, digits, '_')", at, g, s.Diff, g)
		}
	}
}

// checkMCPTool says what is wrong with an mcp.call route's match.tool, or
// "": a tool an upstream passes or hides never becomes an operation, so
// such a route would never match.
func (f *File) checkMCPTool(upstream, tool string) string {
	if !mcpToolName.MatchString(tool) {
		return fmt.Sprintf("match.tool %q must be 1-128 of letters, digits and _ . -", tool)
	}
	u, ok := f.upstream(upstream)
	switch {
	case !ok:
	case slices.Contains(u.Pass, tool):
		return fmt.Sprintf("match.tool %s is in pass of upstream %s: its calls need no approval, so this route never matches", tool, upstream)
	case slices.Contains(u.Hide, tool):
		return fmt.Sprintf("match.tool %s is in hide of upstream %s: it is never called, so this route never matches", tool, upstream)
	}
	return ""
}

func (f *File) upstream(name string) (UpstreamSpec, bool) {
	for _, u := range f.Upstreams {
		if u.Name == name {
			return u, true
		}
	}
	return UpstreamSpec{}, false
}

func (f *File) hasUpstream(name string) bool {
	_, ok := f.upstream(name)
	return ok
}
