package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unconfiguredPolicy lets an agent send email and post to Slack, and routes
// slack.post_message by name; it configures neither part.
func unconfiguredPolicy(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	cfg := fmt.Sprintf(`principals:
  - id: support-agent
    api_key_sha256: "%s"
    scopes: [email.send, "slack.post_message:#general", http.request:calendar]
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com, groups: [owners]}
targets:
  - name: calendar
    base_url: https://calendar.example/api
    allow: [{method: PATCH, path: "/events/*"}]
routes:
  - name: slack
    match: {action: slack.post_message}
    approvers: {groups: [owners]}
    notify: [console]
  - name: rest
    approvers: {groups: [owners]}
    notify: [console]
`, testKeyHash)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	wantUnconfigured = "2 action(s) that the policy file names are not configured:\n" +
		"  email.send (named by principal support-agent): set COUNTERSIGN_SMTP_URL (smtp:// or smtps://)\n" +
		"  slack.post_message (named by principal support-agent, route slack): set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (or SLACK_APP_TOKEN for Socket Mode); see docs/slack.md"
)

// serve refuses to start when a scope or route names an action that is not
// configured, naming every such action and what configures it at once. A
// configured part that is down (an SMTP server and a Slack API nobody
// listens on) is a run-time matter: it starts.
func TestServeRefusesUnconfiguredActions(t *testing.T) {
	env := map[string]string{"COUNTERSIGN_CONFIG": unconfiguredPolicy(t), "COUNTERSIGN_LISTEN": "127.0.0.1:0"}
	if u := os.Getenv("REDIS_URL"); u != "" {
		env["COUNTERSIGN_REDIS_URL"], env["COUNTERSIGN_REDIS_MIN_REPLICAS"] = u, "0"
	}
	open := func() error {
		return (&Main{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Stderr: &syncBuffer{}}).openAndClose()
	}
	if err := open(); err == nil || err.Error() != wantUnconfigured {
		t.Fatalf("start with email.send and slack.post_message unconfigured:\n%v\nwant:\n%s", err, wantUnconfigured)
	}
	env["COUNTERSIGN_SMTP_URL"] = "smtp://127.0.0.1:1?tls=none"
	if err := open(); err == nil || !strings.HasPrefix(err.Error(), "1 action(s)") || strings.Contains(err.Error(), "email.send") {
		t.Fatalf("start with slack.post_message unconfigured: %v", err)
	}
	env["SLACK_BOT_TOKEN"], env["SLACK_SIGNING_SECRET"], env["COUNTERSIGN_SLACK_API_URL"] = "xoxb-1", "s", "http://127.0.0.1:1/api/"
	if err := open(); err != nil {
		t.Fatalf("start with both configured, both down: %v", err)
	}
	// Development mode configures email.send with its mailbox: it starts.
	dev := map[string]string{"COUNTERSIGN_LISTEN": "127.0.0.1:0"}
	if err := (&Main{Env: func(k string) (string, bool) { v, ok := dev[k]; return v, ok }, Stderr: &syncBuffer{}}).openAndClose(); err != nil {
		t.Fatalf("development mode: %v", err)
	}
}

// check-config --env reports the same, with the same words, and exits 1.
func TestCheckConfigReportsUnconfiguredActions(t *testing.T) {
	path := unconfiguredPolicy(t)
	code, out, stderr := runCLI(t, nil, "check-config", "--env", path)
	if code != 1 || !strings.Contains(stderr, wantUnconfigured) {
		t.Fatalf("exit %d, stderr:\n%s\nwant:\n%s\nstdout:\n%s", code, stderr, wantUnconfigured, out)
	}
	env := map[string]string{"COUNTERSIGN_SMTP_URL": "smtp://127.0.0.1:1", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
	if code, out, stderr := runCLI(t, env, "check-config", "--env", path); code != 0 {
		t.Fatalf("all configured: exit %d\n%s\n%s", code, out, stderr)
	}
}
