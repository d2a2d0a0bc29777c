package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir, _ := filepath.Abs("../../mcpserver/testdata/tsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("the TypeScript SDK is not installed: run npm ci in mcpserver/testdata/tsclient")
	}
	a := startService(t, serviceOpts{})
	requireAction(t, a, "email.send")
	b := startService(t, serviceOpts{RedisURL: a.RedisURL})
	cmd := exec.Command(node, "tasks.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+a.URL()+"/mcp", "MCP_URL2="+b.URL()+"/mcp", "API_KEY="+a.APIKey)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var out strings.Builder
	var links []string
	steps := map[string]json.RawMessage{}
	dec := json.NewDecoder(stdout)
	for {
		var s struct {
			Step  string          `json:"step"`
			Value json.RawMessage `json:"value"`
		}
		if err := dec.Decode(&s); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("reading the TypeScript client: %v\n%s", err, stderr.String())
		}
		raw, _ := json.Marshal(s)
		out.Write(append(raw, '\n'))
		steps[s.Step] = s.Value
		if s.Step == "decide" {
			var d struct {
				Key     string `json:"key"`
				Approve bool   `json:"approve"`
				Reason  string `json:"reason"`
			}
			must(t, json.Unmarshal(s.Value, &d))
			link := consoleLinkOf(t, d.Key, "you", a, b) // either replica may notify
			links = append(links, link)
			decision := "reject"
			if d.Approve {
				decision = "approve"
			}
			newBrowser().decide(t, link, decision, d.Reason)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
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
			if len(part) >= 16 && strings.Contains(out.String(), part) {
				t.Errorf("the TypeScript client saw part of an approval link: %q", part)
			}
		}
	}
}
