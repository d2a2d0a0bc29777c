package config_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

// Scopes and routes name the registered actions (action/registry), and
// only an action on targets may name a target.
func TestActionNamesComeFromTheRegistry(t *testing.T) {
	file := func(scopes, match string) string {
		return `
principals:
  - {id: agent, api_key_sha256: "` + keyA + `", scopes: ` + scopes + `}
approvers:
  - {id: grace, email: grace@example.com}
targets:
  - {name: calendar, base_url: "https://cal.example", allow: [{method: PATCH, path: "/events/*"}]}
routes:
  - {match: ` + match + `, approvers: {ids: [grace]}, notify: [email]}
`
	}
	for _, c := range []struct {
		name, scopes, match, want string
	}{
		{"every action", `[email.send, slack.post_message, slack.delete_message, http.request, "http.request:calendar", allowance.grant]`, `{action: "slack.*"}`, ""},
		{"unknown scope", `[email.sent]`, `{}`, `unknown scope "email.sent" (scopes: email.send, slack.post_message, slack.delete_message, http.request, host.tool_call, mcp:NAME, allowance.grant)`},
		{"scope on an unknown target", `["http.request:billing"]`, `{}`, `scope "http.request:billing" names no configured target`},
		{"unknown action", `[email.send]`, `{action: email.sent}`, `match.action "email.sent" is not an action (email.send, slack.post_message, slack.delete_message, http.request, host.tool_call, mcp.call, allowance.grant)`},
		{"target of an action without targets", `[email.send]`, `{action: email.send, target: calendar}`, `match.target applies to http.request, mcp.call, not email.send`},
		{"target of http.request", `[http.request]`, `{action: http.request, target: calendar}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse([]byte(file(c.scopes, c.match)))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
