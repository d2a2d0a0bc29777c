package config_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

// match.tool selects host.tool_call operations by the tool's name, and
// applies to nothing else.
func TestRouteMatchTool(t *testing.T) {
	f, err := config.Parse([]byte(base + `
routes:
  - name: shell
    match: {action: host.tool_call, tool: Bash}
    approvers: {ids: [grace]}
    notify: [console]
`))
	if err != nil {
		t.Fatal(err)
	}
	m := f.Policy().Routes[0].Match
	if got, want := m.String(), "action=host.tool_call tool=Bash"; got != want {
		t.Fatalf("match = %s, want %s", got, want)
	}
	if ok, _ := m.Check("host.tool_call", "support-agent", map[string]string{"tool": "Bash"}); !ok {
		t.Error("Bash not matched")
	}
	if ok, why := m.Check("host.tool_call", "support-agent", map[string]string{"tool": "Write"}); ok || !strings.Contains(why, `tool is "Write"`) {
		t.Errorf("Write matched, or said %q", why)
	}
	_, err = config.Parse([]byte(base + "routes:\n  - match: {action: email.send, tool: Bash}\n    approvers: {ids: [grace]}\n    notify: [console]\n"))
	if err == nil || !strings.Contains(err.Error(), "match.tool applies to host.tool_call") {
		t.Errorf("tool on email.send: %v", err)
	}
}
