package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envPolicy(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	cfg := fmt.Sprintf(`# a comment naming ${NOT_A_REFERENCE} is not a need
principals:
  - id: support-agent
    api_key_sha256: "%s"
    scopes: [email.send, http.request:calendar]
    callback_url: https://agent.example/hook
    callback_secret: "${AGENT_HOOK_SECRET}"
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com, slack_user_id: U0GRACE, groups: [owners]}
targets:
  - name: calendar
    base_url: https://calendar.example/api
    headers: {Authorization: "Bearer ${CAL_TOKEN}"}
    allow: [{method: PATCH, path: "/events/*"}]
routes:
  - name: calendar
    match: {action: http.request, target: calendar}
    approvers: {groups: [owners]}
    notify: ["slack:#approvals"]
  - name: email
    match: {action: email.send}
    approvers: {groups: [owners]}
    notify: [console]
`, testKeyHash)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// check-config --env names every variable serve needs with the file, set
// or MISSING (never a value), and fails naming all the missing ones at once.
func TestCheckConfigEnvListsEveryNeed(t *testing.T) {
	path := envPolicy(t)
	env := map[string]string{"CAL_TOKEN": "secret-cal-token", "SLACK_APP_TOKEN": "xapp-secret", "COUNTERSIGN_REDIS_URL": "redis://r:6379/0"}
	code, out, stderr := runCLI(t, env, "check-config", "--env", path)
	if code == 0 {
		t.Fatalf("exit 0 with variables missing:\n%s", out)
	}
	for _, want := range []string{
		"CAL_TOKEN: set — needed by ${CAL_TOKEN} at " + path + " line 13",
		"AGENT_HOOK_SECRET: MISSING — needed by ${AGENT_HOOK_SECRET} at " + path + " line 7",
		"SLACK_BOT_TOKEN: MISSING — needed by routes notify slack",
		"SLACK_SIGNING_SECRET or SLACK_APP_TOKEN: set",
		"COUNTERSIGN_SMTP_URL: MISSING — needed by principal support-agent names email.send; route email names email.send",
		"COUNTERSIGN_REDIS_URL: set",
		"COUNTERSIGN_LINK_KEYS: not set (serve warns)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "NOT_A_REFERENCE") || strings.Contains(out+stderr, "secret-cal") || strings.Contains(out+stderr, "xapp-secret") {
		t.Errorf("a comment counted, or a value shown:\n%s\n%s", out, stderr)
	}
	for _, name := range []string{"AGENT_HOOK_SECRET", "SLACK_BOT_TOKEN", "COUNTERSIGN_SMTP_URL"} {
		if !strings.Contains(stderr, name) {
			t.Errorf("the error does not name %s: %s", name, stderr)
		}
	}
	if !strings.Contains(stderr, "3 environment variable(s)") {
		t.Errorf("stderr = %q", stderr)
	}

	env["AGENT_HOOK_SECRET"], env["SLACK_BOT_TOKEN"], env["COUNTERSIGN_SMTP_URL"] = "s", "xoxb-1", "smtp://localhost:25"
	if code, out, stderr := runCLI(t, env, "check-config", "--env", path); code != 0 {
		t.Fatalf("all set: exit %d\n%s\n%s", code, out, stderr)
	}
	// Without --env nothing about the environment is asked.
	if code, out, _ := runCLI(t, nil, "check-config", path); code != 0 || strings.Contains(out, "Environment") {
		t.Errorf("without --env: exit %d\n%s", code, out)
	}
}

// serve names every ${VAR} the file refers to that is not set, in one
// error, before it opens anything; with them set, it starts.
func TestServeReportsAllMissingReferencesAtOnce(t *testing.T) {
	path := envPolicy(t)
	env := map[string]string{"COUNTERSIGN_CONFIG": path, "COUNTERSIGN_LISTEN": "127.0.0.1:0",
		"COUNTERSIGN_SMTP_URL": "smtp://127.0.0.1:1?tls=none", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s",
		"COUNTERSIGN_SLACK_API_URL": "http://127.0.0.1:1/api/"}
	if u := os.Getenv("REDIS_URL"); u != "" {
		env["COUNTERSIGN_REDIS_URL"], env["COUNTERSIGN_REDIS_MIN_REPLICAS"] = u, "0"
	}
	main := func() error {
		return (&Main{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Stderr: &syncBuffer{}}).openAndClose()
	}
	err := main()
	if err == nil || !strings.Contains(err.Error(), "2 environment variable(s)") ||
		!strings.Contains(err.Error(), "CAL_TOKEN (needed by ${CAL_TOKEN} at "+path+" line 13)") ||
		!strings.Contains(err.Error(), "AGENT_HOOK_SECRET (needed by ${AGENT_HOOK_SECRET} at "+path+" line 7)") {
		t.Fatalf("start with two references unset: %v", err)
	}
	env["CAL_TOKEN"], env["AGENT_HOOK_SECRET"] = "c", "a-callback-secret-of-32-chars..."
	if err := main(); err != nil {
		t.Fatalf("all set: %v", err)
	}
}
