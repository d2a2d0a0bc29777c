package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestTypeScriptSDKTasks drives /mcp with the TypeScript SDK's own task
// client (testdata/tsclient/tasks.mjs, client.experimental.tasks of SDK
// 1.32, protocol 2025-11-25): it declares the tasks capability, learns
// from tools/list that send_operation may run as a task, and follows it
// with tasks/get while the test decides as the human. Approved: the
// stream ends with the operation's result, and another replica answers
// tasks/get for it; rejected: the task fails and carries the reason;
// cancelled: the operation is canceled. A client without the capability
// gets today's result.
//
//	(cd mcpserver/testdata/tsclient && npm ci) && go test -run TestTypeScriptSDKTasks ./mcpserver
func TestTypeScriptSDKTasks(t *testing.T) {
	h := newHarness(t)
	steps, out := runTSClient(t, "tasks.mjs", []string{"MCP_URL=" + h.httpURL(t), "MCP_URL2=" + h.replica(t)}, 90*time.Second, func(step string, value json.RawMessage) {
		if step == "decide" {
			var d struct {
				Key     string `json:"key"`
				Approve bool   `json:"approve"`
				Reason  string `json:"reason"`
			}
			must(t, json.Unmarshal(value, &d))
			h.approve(t, d.Key, d.Approve, d.Reason)
		}
	})

	type msg struct {
		Type          string         `json:"type"`
		Task          map[string]any `json:"task"`
		Status        string         `json:"status"`
		StatusMessage string         `json:"statusMessage"`
		IsError       bool           `json:"isError"`
		Structured    map[string]any `json:"structured"`
		Error         string         `json:"error"`
	}
	stream := func(name string) []msg {
		var ms []msg
		must(t, json.Unmarshal(steps[name], &ms))
		if len(ms) < 2 || ms[0].Type != "taskCreated" || ms[0].Task["status"] != "working" {
			t.Fatalf("%s: the stream does not start with a working task: %s", name, steps[name])
		}
		return ms
	}
	if !strings.Contains(string(steps["capabilities"]), `"call"`) {
		t.Errorf("the server's tasks capability as the SDK read it: %s", steps["capabilities"])
	}

	ms := stream("approved")
	last := ms[len(ms)-1]
	if last.Type != "result" || last.IsError || last.Structured["status"] != "succeeded" || last.Structured["result"] == nil ||
		last.Structured["operation_key"] != ms[0].Task["taskId"] {
		t.Errorf("approved: %s", steps["approved"])
	}
	var replica map[string]any
	must(t, json.Unmarshal(steps["replica"], &replica))
	if replica["status"] != "completed" || replica["taskId"] != ms[0].Task["taskId"] {
		t.Errorf("another replica's tasks/get: %v", replica)
	}

	ms = stream("rejected")
	if last := ms[len(ms)-1]; last.Type != "error" || !strings.Contains(last.Error, "failed") {
		t.Errorf("rejected: %s", steps["rejected"])
	}
	var rt map[string]any
	must(t, json.Unmarshal(steps["rejectedTask"], &rt))
	if rt["status"] != "failed" || !strings.Contains(rt["statusMessage"].(string), "not to this client") {
		t.Errorf("rejected task: %v", rt)
	}
	var rr struct {
		IsError    bool           `json:"isError"`
		Structured map[string]any `json:"structured"`
	}
	must(t, json.Unmarshal(steps["rejectedResult"], &rr))
	if !rr.IsError || rr.Structured["status"] != "rejected" {
		t.Errorf("rejected task's result: %s", steps["rejectedResult"])
	}

	ms = stream("canceled")
	var ca map[string]any
	must(t, json.Unmarshal(steps["cancelAnswer"], &ca))
	if ca["status"] != "cancelled" || ms[len(ms)-1].Type != "error" {
		t.Errorf("canceled: %s / %s", steps["canceled"], steps["cancelAnswer"])
	}
	if l := string(steps["list"]); strings.Count(l, `"taskId"`) != 3 || !strings.Contains(l, `"cancelled"`) {
		t.Errorf("tasks/list: %s", l)
	}

	var plain struct {
		IsError      bool           `json:"isError"`
		Structured   map[string]any `json:"structured"`
		Capabilities any            `json:"capabilities"`
	}
	must(t, json.Unmarshal(steps["plain"], &plain))
	if plain.IsError || plain.Structured["status"] != "pending_approval" || plain.Capabilities != nil {
		t.Errorf("without the tasks capability: %s", steps["plain"])
	}
	assertNoSecrets(t, h.secrets(), map[string]string{"TypeScript client output": out})
}
