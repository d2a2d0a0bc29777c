package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/config"
)

// The gateway example of SPEC §12 parses, with its defaults, and its
// routes match mcp.call by upstream, tool and argument.
func TestGatewayExampleParses(t *testing.T) {
	f, err := config.Load("testdata/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(f.Upstreams), 2; got != want {
		t.Fatalf("%d upstreams, want %d", got, want)
	}
	files, tickets := f.Upstreams[0], f.Upstreams[1]
	if !files.Stdio() || files.Command[0] != "node" || files.Env["SOME_TOKEN"] != "${SOME_TOKEN}" {
		t.Errorf("files = %+v", files)
	}
	if got, want := strings.Join(files.Pass, ","), "read_text_file,list_directory,search_files,get_file_info"; got != want {
		t.Errorf("pass = %s, want %s", got, want)
	}
	if s := files.State["write_file"]; s.Tool != "read_text_file" || s.Args["path"] != "{path}" || s.Diff != "content" {
		t.Errorf("state.write_file = %+v", s)
	}
	if got, want := files.ResultLimit(), int64(1<<20); got != want {
		t.Errorf("files result limit %d, want %d", got, want)
	}
	if files.Rate() != 120 || files.CallTimeout() != 60*time.Second {
		t.Errorf("files rate %d, timeout %s", files.Rate(), files.CallTimeout())
	}
	if tickets.Stdio() || tickets.URL != "https://mcp.internal.example/mcp" || tickets.CallTimeout() != 2*time.Minute ||
		tickets.ResultLimit() != 1<<20 || tickets.Rate() != 120 {
		t.Errorf("tickets = %+v", tickets)
	}

	p := f.Policy()
	agent := p.Principal("support-agent")
	for _, c := range []struct {
		attrs map[string]string
		route string
	}{
		{map[string]string{"target": "files", "tool": "write_file", "args.path": "/srv/shared/finance/q3.csv"}, "route 1"},
		{map[string]string{"target": "files", "tool": "write_file", "args.path": "/srv/shared/notes.txt"}, "route 2"},
		{map[string]string{"target": "files", "tool": "edit_file", "args.path": "/srv/shared/finance/q3.csv"}, "route 2"},
	} {
		r, err := p.Resolve("mcp.call", agent, c.attrs)
		if err != nil || r.Name != c.route {
			t.Errorf("%v: route %q (%v), want %q", c.attrs, r.Name, err, c.route)
		}
	}
	if got, want := p.Routes[0].Match.String(), `action=mcp.call target=files tool=write_file args.path matches "/srv/shared/finance/*"`; got != want {
		t.Errorf("match = %s\nwant    %s", got, want)
	}
}

// upstreamFile is a valid file with one upstream, written as a YAML flow
// mapping, and more lines after it (routes, principals).
func upstreamFile(upstream, more string) string {
	return `
approvers:
  - {id: grace, email: grace@example.com}
targets:
  - {name: calendar, base_url: "https://cal.example", allow: [{method: PATCH, path: "/events/*"}]}
upstreams:
  - ` + upstream + `
` + more
}

const goodUpstream = `{name: files, command: [node, server.js], env: {FILES_TOKEN: "${FILES_TOKEN}", LOG_LEVEL: debug}, pass: [read_text_file], hide: [move_file], state: {write_file: {tool: read_text_file, args: {path: "{path}", encoding: utf-8}, diff: content}}}`

// Each rule of the upstreams section fails when broken, naming the
// upstream and the field, and never repeats a header or env value.
func TestUpstreamValidation(t *testing.T) {
	for _, c := range []struct {
		name, upstream, want string
	}{
		{"valid stdio", goodUpstream, ""},
		{"valid http", `{name: tickets-2, url: "https://mcp.example/mcp", headers: {Authorization: "Bearer ${TICKETS_TOKEN}", X-Team: support}, max_result_bytes: 16MiB, pass_rate: 10000, timeout: 10m}`, ""},
		{"plain http url", `{name: local, url: "http://127.0.0.1:9000/mcp", timeout: 1s, pass_rate: 1}`, ""},
		{"name with underscore", `{name: my_files, command: [node]}`, `upstreams[0]: name "my_files" must be 1-32 lowercase letters, digits and '-'`},
		{"name uppercase", `{name: Files, command: [node]}`, `upstreams[0]: name "Files" must be`},
		{"name too long", `{name: ` + strings.Repeat("a", 33) + `, command: [node]}`, `must be 1-32 lowercase`},
		{"no name", `{command: [node]}`, `upstreams[0]: name "" must be`},
		{"neither command nor url", `{name: files}`, "upstream files: needs command (stdio) or url (streamable HTTP)"},
		{"both command and url", `{name: files, command: [node], url: "https://mcp.example/mcp"}`, "upstream files: has both command and url"},
		{"empty program", `{name: files, command: [""]}`, "upstream files: command[0] must name the program"},
		{"env in command", `{name: files, command: [node, "--token=${T}"]}`, "upstream files: command cannot use ${ENV_VAR} references"},
		{"bad url", `{name: files, url: "mcp.example/mcp"}`, `upstream files: url "mcp.example/mcp" must be an absolute http(s) URL`},
		{"url scheme", `{name: files, url: "ftp://mcp.example/mcp"}`, "must be an absolute http(s) URL"},
		{"url credentials", `{name: files, url: "https://u:p@mcp.example/mcp"}`, "upstream files: url must not carry credentials"},
		{"url query", `{name: files, url: "https://mcp.example/mcp?key=k"}`, "upstream files: url must not have a query"},
		{"url env", `{name: files, url: "https://mcp.example/${TENANT}/mcp"}`, "upstream files: url cannot use ${ENV_VAR}"},
		{"headers with command", `{name: files, command: [node], headers: {X-Team: a}}`, "upstream files: headers apply to an upstream reached by url"},
		{"env with url", `{name: files, url: "https://mcp.example/mcp", env: {A: b}}`, "upstream files: env applies to an upstream started by command"},
		{"literal credential header", `{name: files, url: "https://mcp.example/mcp", headers: {Authorization: "Bearer sk-live-123"}}`, "upstream files: header Authorization looks like a credential; its value must be a ${ENV_VAR} reference"},
		{"literal token header", `{name: files, url: "https://mcp.example/mcp", headers: {X-Api-Key: "sk-live-123"}}`, "upstream files: header X-Api-Key looks like a credential"},
		{"literal credential env", `{name: files, command: [node], env: {GITHUB_TOKEN: "sk-live-123"}}`, "upstream files: env GITHUB_TOKEN looks like a credential"},
		{"bad env name", `{name: files, command: [node], env: {"A-B": x}}`, `upstream files: env "A-B" is not a variable name`},
		{"bad header name", `{name: files, url: "https://mcp.example/mcp", headers: {"X Team": a}}`, `upstream files: "X Team" is not a header name`},
		{"reserved header", `{name: files, url: "https://mcp.example/mcp", headers: {Mcp-Session-Id: a}}`, "upstream files: header Mcp-Session-Id is set by countersign"},
		{"header line break", `{name: files, url: "https://mcp.example/mcp", headers: {X-Team: "a\r\nX-Evil: sk-live-123"}}`, "upstream files: header X-Team has a line break"},
		{"pass and hide", `{name: files, command: [node], pass: [read, mv], hide: [mv]}`, "upstream files: tool mv is in both pass and hide"},
		{"pass twice", `{name: files, command: [node], pass: [read, read]}`, "upstream files: pass: tool read is listed twice"},
		{"bad tool name", `{name: files, command: [node], hide: ["move file"]}`, `upstream files: hide: tool "move file" must be 1-128`},
		{"state on a pass tool", `{name: files, command: [node], pass: [read, write], state: {write: {tool: read}}}`, "upstream files: state.write: write is in pass; state binds the approval of a guarded tool"},
		{"state on a hidden tool", `{name: files, command: [node], pass: [read], hide: [write], state: {write: {tool: read}}}`, "upstream files: state.write: write is in hide"},
		{"state without tool", `{name: files, command: [node], state: {write: {args: {path: "{path}"}}}}`, "upstream files: state.write: tool must name the read tool"},
		{"state reads itself", `{name: files, command: [node], state: {write: {tool: write}}}`, "upstream files: state.write: tool must be a read tool, not write itself"},
		{"state reads a guarded tool", `{name: files, command: [node], pass: [read], state: {write: {tool: delete}}}`, "upstream files: state.write: read tool delete is guarded; list it in pass"},
		{"state reads a hidden tool", `{name: files, command: [node], hide: [read], state: {write: {tool: read}}}`, ""},
		{"template not an identifier", `{name: files, command: [node], pass: [read], state: {write: {tool: read, args: {path: "{a.b}"}}}}`, `upstream files: state.write: args.path "{a.b}": a template is a whole value "{name}"`},
		{"template inside a literal", `{name: files, command: [node], pass: [read], state: {write: {tool: read, args: {path: "/srv/{path}"}}}}`, `args.path "/srv/{path}": a template is a whole value`},
		{"empty template", `{name: files, command: [node], pass: [read], state: {write: {tool: read, args: {path: "{}"}}}}`, `args.path "{}": a template`},
		{"bad diff", `{name: files, command: [node], pass: [read], state: {write: {tool: read, diff: "content.text"}}}`, `upstream files: state.write: diff "content.text" must name a top-level argument`},
		{"result limit too large", `{name: files, command: [node], max_result_bytes: 17MiB}`, "upstream files: max_result_bytes must be at most 16MiB"},
		{"pass rate too high", `{name: files, command: [node], pass_rate: 10001}`, "upstream files: pass_rate must be between 1 and 10000"},
		{"pass rate negative", `{name: files, command: [node], pass_rate: -1}`, "upstream files: pass_rate must be between 1 and 10000"},
		{"timeout too short", `{name: files, command: [node], timeout: 500ms}`, "upstream files: timeout 500ms must be between 1s and 10m"},
		{"timeout too long", `{name: files, command: [node], timeout: 11m}`, "upstream files: timeout 11m0s must be between 1s and 10m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse([]byte(upstreamFile(c.upstream, "")))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v\nwant %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), "sk-live"):
				t.Fatalf("the error shows a value: %v", err)
			}
		})
	}

	_, err := config.Parse([]byte(upstreamFile(goodUpstream, "  - "+goodUpstream+"\n")))
	if err == nil || !strings.Contains(err.Error(), `upstreams[1]: duplicate name "files"`) {
		t.Errorf("duplicate upstream: %v", err)
	}
}

// Scopes allow mcp.call per upstream (mcp:NAME) or per tool
// (mcp:NAME/TOOL), and only on a configured upstream.
func TestMCPScopes(t *testing.T) {
	for _, c := range []struct {
		scopes, want string
	}{
		{`["mcp:files", "mcp:files/write_file", email.send]`, ""},
		{`[mcp]`, `scope "mcp" names no upstream: write mcp:NAME`},
		{`["mcp:"]`, `scope "mcp:" names no upstream: write mcp:NAME`},
		{`["mcp:/write_file"]`, `names no upstream`},
		{`[mcp.call]`, `scope "mcp.call": mcp.call is allowed per upstream: write mcp:NAME`},
		{`["mcp.call:files"]`, `scope "mcp.call:files": mcp.call is allowed per upstream`},
		{`["mcp:tickets"]`, `scope "mcp:tickets" names no configured upstream`},
		{`["mcp:calendar"]`, `scope "mcp:calendar" names no configured upstream`},
		{`["mcp:files/write file"]`, `scope "mcp:files/write file": tool "write file" must be 1-128`},
		{`["mcp:files/"]`, `tool "" must be 1-128`},
		{`["http.request:files"]`, `scope "http.request:files" names no configured target`},
		{`[mcp.send]`, `unknown scope "mcp.send" (scopes: email.send, slack.post_message, slack.delete_message, http.request, host.tool_call, mcp:NAME, allowance.grant)`},
	} {
		t.Run(c.scopes, func(t *testing.T) {
			_, err := config.Parse([]byte(upstreamFile(goodUpstream, `principals:
  - {id: agent, api_key_sha256: "`+keyA+`", scopes: `+c.scopes+`}
`)))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v\nwant %q", err, c.want)
			}
		})
	}
	for _, c := range []struct{ scope, upstream, tool string }{
		{"mcp:files", "files", ""}, {"mcp:files/write_file", "files", "write_file"},
	} {
		if u, tool, ok := config.MCPScope(c.scope); !ok || u != c.upstream || tool != c.tool {
			t.Errorf("MCPScope(%q) = %q, %q, %v", c.scope, u, tool, ok)
		}
	}
	if _, _, ok := config.MCPScope("http.request:files"); ok {
		t.Error("http.request:files read as an mcp scope")
	}
}

// A route's target is an upstream for mcp.call, an HTTP target for
// http.request, and either for a route naming no action; mcp.call routes
// may match tool and args.
func TestMCPRoutes(t *testing.T) {
	for _, c := range []struct {
		name, match, want string
	}{
		{"upstream of mcp.call", `{action: mcp.call, target: files, tool: write_file, when: [{attr: args.path, matches: "/srv/*"}, {attr: /args/mode, eq: "0644"}]}`, ""},
		{"target of mcp.call", `{action: mcp.call, target: calendar}`, `match.target "calendar" is not an upstream`},
		{"upstream of http.request", `{action: http.request, target: files}`, `match.target "files" is not a target`},
		{"no action, upstream", `{target: files}`, ""},
		{"no action, target", `{target: calendar}`, ""},
		{"no action, neither", `{target: tickets}`, `match.target "tickets" is neither a target nor an upstream`},
		{"wildcard action, upstream", `{action: "mcp.*", target: files}`, `match.target applies to http.request, mcp.call, not mcp.*`},
		{"upstream of email.send", `{action: email.send, target: files}`, `match.target applies to http.request, mcp.call, not email.send`},
		{"tool of mcp.call", `{action: mcp.call, tool: delete_file}`, ""},
		{"tool syntax", `{action: mcp.call, tool: "delete file"}`, `match.tool "delete file" must be 1-128`},
		{"tool that passes", `{action: mcp.call, target: files, tool: read_text_file}`, "match.tool read_text_file is in pass of upstream files: its calls need no approval, so this route never matches"},
		{"tool that is hidden", `{action: mcp.call, target: files, tool: move_file}`, "match.tool move_file is in hide of upstream files"},
		{"tool of email.send", `{action: email.send, tool: write_file}`, "match.tool applies to host.tool_call, mcp.call, not email.send"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse([]byte(upstreamFile(goodUpstream, "routes:\n  - {match: "+c.match+", approvers: {ids: [grace]}, notify: [console]}\n")))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v\nwant %q", err, c.want)
			}
		})
	}
}

// ResolveEnv expands env (stdio) and headers (HTTP); an unset variable is
// an error naming the upstream, the key and the variable, never a value.
func TestUpstreamResolveEnv(t *testing.T) {
	env := map[string]string{"FILES_TOKEN": "tok-1", "TICKETS_TOKEN": "tok-2"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	stdio := config.UpstreamSpec{Name: "files", Command: []string{"node"}, Env: map[string]string{"FILES_TOKEN": "${FILES_TOKEN}", "LOG_LEVEL": "debug"}}
	e, h, err := stdio.ResolveEnv(lookup)
	if err != nil || e["FILES_TOKEN"] != "tok-1" || e["LOG_LEVEL"] != "debug" || h != nil {
		t.Fatalf("stdio: %v %v %v", e, h, err)
	}
	http := config.UpstreamSpec{Name: "tickets", URL: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": "Bearer ${TICKETS_TOKEN}"}}
	e, h, err = http.ResolveEnv(lookup)
	if err != nil || h["Authorization"] != "Bearer tok-2" || e != nil {
		t.Fatalf("http: %v %v %v", e, h, err)
	}
	delete(env, "TICKETS_TOKEN")
	if _, _, err := http.ResolveEnv(lookup); err == nil || err.Error() != "upstream tickets: header Authorization: environment variable TICKETS_TOKEN is not set" {
		t.Errorf("unset header variable: %v", err)
	}
	stdio.Env["OTHER"] = "${OTHER_SECRET}"
	if _, _, err := stdio.ResolveEnv(lookup); err == nil || err.Error() != "upstream files: env OTHER: environment variable OTHER_SECRET is not set" || strings.Contains(err.Error(), "tok-1") {
		t.Errorf("unset env variable: %v", err)
	}
}

// The limits' defaults, and the values set.
func TestUpstreamLimits(t *testing.T) {
	u := config.UpstreamSpec{}
	if u.ResultLimit() != 1<<20 || u.Rate() != 120 || u.CallTimeout() != time.Minute {
		t.Errorf("defaults: %d %d %s", u.ResultLimit(), u.Rate(), u.CallTimeout())
	}
	u = config.UpstreamSpec{MaxResultBytes: 4096, PassRate: 7, Timeout: config.Duration(5 * time.Second)}
	if u.ResultLimit() != 4096 || u.Rate() != 7 || u.CallTimeout() != 5*time.Second {
		t.Errorf("set: %d %d %s", u.ResultLimit(), u.Rate(), u.CallTimeout())
	}
}
