package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func upstreamPolicy(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	cfg := fmt.Sprintf(`upstreams:
  - name: files
    command: [node, "/opt/mcp/file server.js", /srv/shared]
    env: {FILES_TOKEN: "${FILES_TOKEN}", LOG_LEVEL: literal-env-value}
    pass: [read_text_file, list_directory]
    hide: [move_file]
    state:
      write_file: {tool: read_text_file, args: {path: "{path}"}, diff: content}
    max_result_bytes: 64KiB
    pass_rate: 30
  - name: tickets
    url: https://mcp.internal.example/mcp
    headers: {Authorization: "Bearer ${TICKETS_AUTH}", X-Team: literal-header-value}
    timeout: 2m
principals:
  - {id: files-agent, api_key_sha256: "%s", scopes: ["mcp:files"]}
  - {id: ticket-agent, api_key_sha256: "%s", scopes: ["mcp:tickets/create_issue"]}
approvers:
  - {id: grace, email: grace@example.com, groups: [owners]}
  - {id: ada, email: ada@example.com, groups: [owners]}
routes:
  - name: finance-files
    match: {action: mcp.call, target: files, tool: write_file, when: [{attr: args.path, matches: "/srv/shared/finance/*"}]}
    approvers: {groups: [owners]}
    required: 2
    notify: [console]
  - name: tools
    match: {action: mcp.call}
    approvers: {ids: [grace]}
    notify: [console]
`, testKeyHash, testKeyHash)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// check-config lists each upstream: its transport, command or URL, pass,
// hide, state bindings and limits, never an env or header value; and it
// explains mcp.call samples by upstream, tool and argument.
func TestCheckConfigListsUpstreams(t *testing.T) {
	path := upstreamPolicy(t)
	code, out, stderr := runCLI(t, nil, "check-config", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"MCP upstreams (2):",
		`  files  stdio: node "/opt/mcp/file server.js" /srv/shared`,
		"     env:     FILES_TOKEN, LOG_LEVEL (values never shown)",
		"     pass:    read_text_file, list_directory (run at once, no approval)",
		"     hide:    move_file (never offered to agents)",
		"     guarded: every other tool",
		`     state:   write_file is bound to read_text_file(path: "{path}"), shown as a diff against its argument content`,
		"     limits:  results up to 64KiB, 30 pass calls a minute per principal, 1m0s per call",
		"  tickets  streamable HTTP: https://mcp.internal.example/mcp",
		"     headers: Authorization, X-Team (values from the environment, never shown)",
		"     pass:    none\n     hide:    none\n",
		"     limits:  results up to 1MiB, 120 pass calls a minute per principal, 2m0s per call",
		`    mcp:files                    → route "tools": 1 of [grace]`,
		`    mcp:tickets/create_issue     → route "tools": 1 of [grace]`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "literal-") {
		t.Errorf("an env or header value is shown:\n%s", out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--principal", "files-agent", "--attr", "target=files", "--attr", "tool=write_file", "--attr", "args.path=/srv/shared/finance/q.csv"},
			`→ route "finance-files": 2 of [grace, ada]`},
		{[]string{"--principal", "files-agent", "--attr", "target=files", "--attr", "tool=write_file", "--attr", "args.path=/srv/shared/a.txt"},
			"finance-files: skipped, args.path matches \"/srv/shared/finance/*\" does not hold"},
		{[]string{"--principal", "ticket-agent", "--attr", "target=tickets", "--attr", "tool=create_issue"}, `→ route "tools": 1 of [grace]`},
		{[]string{"--principal", "ticket-agent", "--attr", "target=tickets", "--attr", "tool=close_issue"},
			"REFUSED: insufficient_scope: ticket-agent may not prepare mcp:tickets/close_issue"},
		{[]string{"--principal", "files-agent", "--attr", "target=tickets", "--attr", "tool=create_issue"},
			"REFUSED: insufficient_scope: files-agent may not prepare mcp:tickets/create_issue"},
		{[]string{"--principal", "files-agent"}, "REFUSED: insufficient_scope: files-agent may not prepare mcp.call without an upstream (give it with --attr target=NAME)"},
	} {
		code, out, stderr := runCLI(t, nil, append([]string{"check-config", path, "--action", "mcp.call"}, c.args...)...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, output lacks %q:\n%s%s", c.args, code, c.want, out, stderr)
		}
	}
}

// check-config --env lists the variables the upstreams' env and headers
// refer to, saying which upstream and key needs each, and fails naming the
// missing ones.
func TestCheckConfigEnvListsUpstreamNeeds(t *testing.T) {
	path := upstreamPolicy(t)
	code, out, stderr := runCLI(t, map[string]string{"FILES_TOKEN": "secret-files-token"}, "check-config", "--env", path)
	if code == 0 {
		t.Fatalf("exit 0 with TICKETS_AUTH missing:\n%s", out)
	}
	for _, want := range []string{
		"FILES_TOKEN: set — needed by ${FILES_TOKEN} at " + path + " line 4; upstream files env FILES_TOKEN",
		"TICKETS_AUTH: MISSING — needed by ${TICKETS_AUTH} at " + path + " line 13; upstream tickets header Authorization",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "1 environment variable(s)") || !strings.Contains(stderr, "TICKETS_AUTH") ||
		strings.Contains(out+stderr, "secret-files-token") || strings.Contains(out+stderr, "literal-") {
		t.Errorf("stderr = %q\n%s", stderr, out)
	}
	env := map[string]string{"FILES_TOKEN": "x", "TICKETS_AUTH": "y"}
	if code, out, stderr := runCLI(t, env, "check-config", "--env", path); code != 0 {
		t.Fatalf("all set: exit %d\n%s\n%s", code, out, stderr)
	}
}
