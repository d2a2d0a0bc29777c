package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMCPTasksThroughServe: the TypeScript SDK's task client
// (mcpserver/testdata/tsclient/tasks.mjs) against two replicas of serve on
// one Redis. It sends as a task on one replica; the human decides on the
// approval page from the console link; the task completes (or fails with
// the reason, or is cancelled), and the other replica answers tasks/get
// for it. No step carries the link.
func TestMCPTasksThroughServe(t *testing.T) {
	a := startService(t, serviceOpts{})
	requireAction(t, a, "email.send")
	b := startService(t, serviceOpts{RedisURL: a.RedisURL})
	var links []string
	steps, out := runTSClient(t, "tasks.mjs", []string{"MCP_URL=" + a.URL() + "/mcp", "MCP_URL2=" + b.URL() + "/mcp", "API_KEY=" + a.APIKey}, func(step string, value json.RawMessage) {
		if step == "decide" {
			var d struct {
				Key     string `json:"key"`
				Approve bool   `json:"approve"`
				Reason  string `json:"reason"`
			}
			must(t, json.Unmarshal(value, &d))
			link := consoleLinkOf(t, d.Key, "you", a, b) // either replica may notify
			links = append(links, link)
			decision := "reject"
			if d.Approve {
				decision = "approve"
			}
			newBrowser().decide(t, link, decision, d.Reason)
		}
	})
	for _, want := range []struct{ step, text string }{
		{"approved", `"type":"taskCreated"`},
		{"approved", `"status":"succeeded"`},
		{"replica", `"status":"completed"`},
		{"rejected", `failed`},
		{"rejectedTask", `not to this client`},
		{"rejectedResult", `"isError":true`},
		{"cancelAnswer", `"status":"cancelled"`},
		{"plain", `"status":"pending_approval"`},
	} {
		if !strings.Contains(string(steps[want.step]), want.text) {
			t.Errorf("%s: %s lacks %s", want.step, steps[want.step], want.text)
		}
	}
	if len(links) != 2 {
		t.Fatalf("%d decisions, want 2", len(links))
	}
	for _, l := range links {
		_, tok, _ := strings.Cut(l, "/a/")
		for _, part := range append([]string{tok}, strings.Split(tok, ".")...) {
			if len(part) >= 16 && strings.Contains(out, part) {
				t.Errorf("the TypeScript client saw part of an approval link: %q", part)
			}
		}
	}
}
