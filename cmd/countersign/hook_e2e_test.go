package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/receipt"
)

// hookConfig: a coding agent whose tool calls go to grace, except writes
// under /srv/prod, which go to ada.
func hookConfig() string {
	return fmt.Sprintf(`
principals:
  - id: coder
    api_key_sha256: "%s"
    scopes: [host.tool_call]
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com}
  - {id: ada, name: Ada Byron, email: ada@example.com}
routes:
  - name: production files
    match: {action: host.tool_call, tool: Write, when: [{attr: args.file_path, matches: "/srv/prod/*"}]}
    approvers: {ids: [ada]}
    notify: [console]
  - name: every other tool call
    match: {action: host.tool_call}
    approvers: {ids: [grace]}
    notify: [console]
`, testKeyHash)
}

// hookRun is one run of `countersign hook claude-code`.
type hookRun struct {
	code           int
	stdout, stderr string
}

// answer is the hook's stdout, decoded.
func (r hookRun) answer(t *testing.T) (decision, reason, system string) {
	t.Helper()
	var out struct {
		Hook struct {
			Event    string `json:"hookEventName"`
			Decision string `json:"permissionDecision"`
			Reason   string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
		System string `json:"systemMessage"`
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if r.code != 0 || dec.Decode(&out) != nil || out.Hook.Event != "PreToolUse" {
		t.Fatalf("the hook must exit 0 with its JSON on stdout; exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	return out.Hook.Decision, out.Hook.Reason, out.System
}

// startHook runs the hook in-process with stdin, as Claude Code would
// start it, and returns its result when it ends.
func startHook(env map[string]string, stdin string, args ...string) <-chan hookRun {
	return startHookCtx(context.Background(), env, stdin, args...)
}

// startHookCtx is startHook in a context whose end is a signal (SIGTERM).
func startHookCtx(ctx context.Context, env map[string]string, stdin string, args ...string) <-chan hookRun {
	done := make(chan hookRun, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"hook", "claude-code"}, args...), strings.NewReader(stdin), &out, &errb, mapEnv(env))
		done <- hookRun{code, out.String(), errb.String()}
	}()
	return done
}

func waitHook(t *testing.T, done <-chan hookRun) hookRun {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the hook did not answer")
		return hookRun{}
	}
}

// claudeHookJSON is the stdin of a PreToolUse hook (verified shape, see
// docs/agent-hosts.md).
func claudeHookJSON(t *testing.T, tool, toolUseID string, toolInput any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"session_id": "sess-1", "transcript_path": "/home/dev/.claude/projects/x/sess-1.jsonl", "cwd": "/home/dev/app",
		"permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": toolInput,
		"tool_use_id": toolUseID,
	})
	must(t, err)
	return string(b)
}

// pendingKey waits for the principal's one pending operation.
func pendingKey(t *testing.T, srv *testService) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		list := decode[struct {
			Operations []op `json:"operations"`
		}](t, mustCall(t, srv, "GET", "/v1/operations?status=pending_approval", "", 200))
		if len(list.Operations) == 1 {
			return list.Operations[0].Key
		}
		if len(list.Operations) > 1 {
			t.Fatalf("%d pending operations, want 1", len(list.Operations))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the hook asked for no approval")
	return ""
}

// approversOf says who the operation's route asks: "grace, ada".
func approversOf(t *testing.T, srv *testService, key string) string {
	t.Helper()
	v := decode[struct {
		Approval struct {
			Approvers []string `json:"approvers"`
		} `json:"approval"`
	}](t, mustCall(t, srv, "GET", "/v1/operations/"+key, "", 200))
	return strings.Join(v.Approval.Approvers, ", ")
}

// TestClaudeCodeHook runs `countersign hook claude-code` with Claude
// Code's PreToolUse JSON against a real service: a human approves on the
// page (allow, with a receipt bound to the exact call), rejects with a
// reason (deny with it), lets the window pass (deny), or does not answer
// in time (deny, and the request is withdrawn). A service that is down,
// input that is not a hook's, and a missing key deny too. Nothing the
// hook prints carries a link.
func TestClaudeCodeHook(t *testing.T) {
	defer func(p time.Duration) { hookPoll = p }(hookPoll)
	hookPoll = time.Second // each status read wakes within a second of a jump of the clock
	clock := &jumpClock{}
	srv := startService(t, serviceOpts{Config: hookConfig(), Now: clock.Now,
		Env: map[string]string{"COUNTERSIGN_RECEIPT_KEYS": "hk1:" + strings.Repeat("C", 43) + "="}})
	env := map[string]string{"COUNTERSIGN_URL": srv.URL(), "COUNTERSIGN_API_KEY": srv.APIKey}
	var links []string
	printed := map[string]string{}

	t.Run("approved: allow, with a receipt of the exact call", func(t *testing.T) {
		command := "rm -rf build/ && echo \u202edone"
		done := startHook(env, claudeHookJSON(t, "Bash", "toolu_01A", map[string]any{"command": command, "description": "Clean the build", "timeout": 120000}))
		key := pendingKey(t, srv)
		o := decode[op](t, mustCall(t, srv, "GET", "/v1/operations/"+key, "", 200))
		fields := map[string]string{}
		for _, f := range o.Preview.Fields {
			fields[f.Name] = f.Value
		}
		if fields["host"] != "claude-code" || fields["tool"] != "Bash" || fields["args.command"] != command ||
			fields["args.timeout"] != "120000" || fields["cwd"] != "/home/dev/app" {
			t.Errorf("preview fields: %v", fields)
		}
		if got := approversOf(t, srv, key); got != "grace" {
			t.Errorf("Bash went to %q, want grace", got)
		}
		link := srv.consoleLink(t, key, "grace")
		links = append(links, link)
		if st, page := newBrowser().decide(t, link, "approve", ""); st != 200 || !strings.Contains(page, "rm -rf build/") {
			t.Fatalf("approve: %d", st)
		}
		r := waitHook(t, done)
		decision, reason, system := r.answer(t)
		if decision != "allow" || !strings.Contains(reason, "grace") || !strings.Contains(system, key) {
			t.Fatalf("answer: %s %q %q", decision, reason, system)
		}
		if !strings.Contains(r.stderr, "Bash waits for a human's approval (operation "+key+", approvers: grace)") {
			t.Errorf("no status line for the user: %q", r.stderr)
		}
		printed["approved stdout"], printed["approved stderr"] = r.stdout, r.stderr

		// The receipt binds the decision to the payload hash of exactly
		// this call.
		o = srv.waitFor(t, key, "succeeded")
		var res struct {
			RunBy   string `json:"run_by"`
			Receipt string `json:"receipt"`
		}
		must(t, json.Unmarshal(o.Result, &res))
		jwks, err := receipt.ParseJWKS(mustCall(t, srv, "GET", "/.well-known/jwks.json", "", 200))
		must(t, err)
		c, err := receipt.Verify(context.Background(), res.Receipt, jwks, receipt.Expect{Audience: "claude-code", Now: clock.Now()})
		if err != nil || res.RunBy != "claude-code" || c.Action != "host.tool_call" || c.PayloadHash != o.PayloadHash || c.ID != key {
			t.Fatalf("receipt %+v: %v (result %s)", c, err, o.Result)
		}
		var in struct {
			Tool      string         `json:"tool"`
			ToolInput map[string]any `json:"tool_input"`
		}
		must(t, json.Unmarshal(o.Input, &in))
		if in.Tool != "Bash" || in.ToolInput["command"] != command {
			t.Errorf("stored input: %s", o.Input)
		}

		// The same tool call again (a retried hook) asks nobody twice.
		r = waitHook(t, startHook(env, claudeHookJSON(t, "Bash", "toolu_01A", map[string]any{"command": command, "description": "Clean the build", "timeout": 120000})))
		if decision, _, _ := r.answer(t); decision != "allow" {
			t.Errorf("the same tool_use_id again: %s", decision)
		}
	})

	t.Run("rejected with a reason: deny with it", func(t *testing.T) {
		done := startHook(env, claudeHookJSON(t, "Write", "toolu_01B", map[string]any{"file_path": "/srv/prod/app.env", "content": "DEBUG=1\n"}))
		key := pendingKey(t, srv)
		if got := approversOf(t, srv, key); got != "ada" {
			t.Errorf("a Write under /srv/prod went to %q, want ada", got)
		}
		link := srv.consoleLink(t, key, "ada")
		links = append(links, link)
		if st, _ := newBrowser().decide(t, link, "reject", "not on a Friday"); st != 200 {
			t.Fatalf("reject: %d", st)
		}
		r := waitHook(t, done)
		decision, reason, _ := r.answer(t)
		if decision != "deny" || !strings.Contains(reason, "ada rejected") || !strings.Contains(reason, "not on a Friday") {
			t.Fatalf("answer: %s %q", decision, reason)
		}
		printed["rejected stdout"], printed["rejected stderr"] = r.stdout, r.stderr
	})

	t.Run("no decision within --wait: deny and withdraw", func(t *testing.T) {
		done := startHook(env, claudeHookJSON(t, "mcp__github__create_issue", "toolu_01C", map[string]any{"repo": "acme/app", "title": "Flaky test"}), "--wait", "2s")
		key := pendingKey(t, srv)
		r := waitHook(t, done)
		decision, reason, _ := r.answer(t)
		if decision != "deny" || !strings.Contains(reason, "No decision within 2s") {
			t.Fatalf("answer: %s %q", decision, reason)
		}
		srv.waitFor(t, key, "canceled")
	})

	t.Run("stopped while waiting: deny and withdraw", func(t *testing.T) {
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		done := startHookCtx(ctx, env, claudeHookJSON(t, "Bash", "toolu_01G", map[string]any{"command": "make deploy"}))
		key := pendingKey(t, srv)
		stop()
		decision, reason, _ := waitHook(t, done).answer(t)
		if decision != "deny" || !strings.Contains(reason, "stopped before a decision") {
			t.Fatalf("answer: %s %q", decision, reason)
		}
		srv.waitFor(t, key, "canceled")
	})

	t.Run("the approval window ends: deny", func(t *testing.T) {
		done := startHook(env, claudeHookJSON(t, "Edit", "toolu_01D", map[string]any{"file_path": "/home/dev/app/main.go", "old_string": "a", "new_string": "b", "replace_all": false}))
		key := pendingKey(t, srv)
		clock.Add(7 * 24 * time.Hour)
		r := waitHook(t, done)
		decision, reason, _ := r.answer(t)
		if decision != "deny" || !strings.Contains(reason, "approval window ended") || !strings.Contains(reason, key) {
			t.Fatalf("answer: %s %q", decision, reason)
		}
		printed["expired stdout"], printed["expired stderr"] = r.stdout, r.stderr
	})

	t.Run("every failure denies", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		down := "http://" + l.Addr().String()
		must(t, l.Close())
		bash := claudeHookJSON(t, "Bash", "toolu_01E", map[string]any{"command": "ls"})
		for _, c := range []struct {
			name  string
			env   map[string]string
			stdin string
			want  string
		}{
			{"service down", map[string]string{"COUNTERSIGN_URL": down, "COUNTERSIGN_API_KEY": srv.APIKey}, bash, "unavailable"},
			{"not JSON", env, `{"tool_name": "Bash", `, "not the JSON"},
			{"not a PreToolUse hook", env, `{"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {}}`, "PreToolUse"},
			{"empty stdin", env, "", "not the JSON"},
			{"no API key", map[string]string{"COUNTERSIGN_URL": srv.URL()}, bash, "COUNTERSIGN_API_KEY"},
			{"unknown key", map[string]string{"COUNTERSIGN_URL": srv.URL(), "COUNTERSIGN_API_KEY": "cs_not_a_key_of_this_service_at_all"}, bash, "unauthenticated"},
			{"tool input not an object", env, claudeHookJSON(t, "Bash", "toolu_01F", []string{"ls"}), "invalid_input"},
		} {
			r := waitHook(t, startHook(c.env, c.stdin))
			decision, reason, _ := r.answer(t)
			if decision != "deny" || !strings.Contains(reason, c.want) {
				t.Errorf("%s: %s %q, want a deny saying %q", c.name, decision, reason, c.want)
			}
			printed[c.name] = r.stdout + r.stderr
		}
		// A wrong command line exits 2, which Claude Code takes as a block.
		if r := waitHook(t, startHook(env, bash, "--wait", "0s")); r.code != 2 {
			t.Errorf("--wait 0s: exit %d", r.code)
		}
	})

	assertNoCapabilities(t, links, printed)
}
