package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/config"
)

// actionSetup says what configures an action that is only wired when its
// part is configured; "" for the built-in actions, always wired.
func actionSetup(action string) string {
	switch {
	case action == "email.send":
		return "set COUNTERSIGN_SMTP_URL (smtp:// or smtps://)"
	case strings.HasPrefix(action, "slack."):
		return "set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (or SLACK_APP_TOKEN for Socket Mode); see docs/slack.md"
	case action == "http.request":
		return "add its target under targets: in the policy file"
	case action == mcpcall.Name:
		return "add the MCP server under upstreams: in the policy file (docs/gateway.md)"
	}
	return ""
}

// unconfiguredActions fails naming, all at once, every concrete action a
// scope or route names that is not wired (wired reports whether it is):
// an agent allowed email.send with no SMTP server would otherwise learn it
// at its first approved operation. It checks configuration only: a
// configured part that is down is a run-time matter (the effect retries).
func unconfiguredActions(f *config.File, wired func(string) bool) error {
	var order []string
	by := map[string][]string{}
	for _, a := range namedActions(f) {
		if actionSetup(a.action) == "" || wired(a.action) {
			continue // built in (host.tool_call, allowance.grant), or wired
		}
		if _, seen := by[a.action]; !seen {
			order = append(order, a.action)
		}
		if !slices.Contains(by[a.action], a.by) {
			by[a.action] = append(by[a.action], a.by)
		}
	}
	if len(order) == 0 {
		return nil
	}
	lines := make([]string, len(order))
	for i, a := range order {
		lines[i] = fmt.Sprintf("  %s (named by %s): %s", a, strings.Join(by[a], ", "), actionSetup(a))
	}
	return fmt.Errorf("%d action(s) that the policy file names are not configured:\n%s", len(order), strings.Join(lines, "\n"))
}

// configuredByEnv reports whether serve would wire an action given the
// environment (presence only) and the file: what check-config --env checks.
func configuredByEnv(f *config.File, lookup func(string) (string, bool)) func(string) bool {
	set := func(n string) bool { v, ok := lookup(n); return ok && v != "" }
	return func(action string) bool {
		switch {
		case action == "email.send":
			return set("COUNTERSIGN_SMTP_URL")
		case strings.HasPrefix(action, "slack."):
			return set("SLACK_BOT_TOKEN") && (set("SLACK_SIGNING_SECRET") || set("SLACK_APP_TOKEN"))
		case action == "http.request":
			return len(f.Targets) > 0
		case action == mcpcall.Name:
			return len(f.Upstreams) > 0
		}
		return true // built in
	}
}
