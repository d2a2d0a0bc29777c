package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// agentHostsDir holds the TypeScript examples of docs/agent-hosts.md.
const agentHostsDir = "../../examples/agent-hosts"

// TestAgentHostExamples runs the documented TypeScript examples with node
// against a real service: the OpenAI Agents SDK's needsApproval and a
// LangGraph interrupt, each with its tool call scripted (no model). A
// human approves one run of each on the page and rejects another with a
// reason: the tool runs only when approved, and the model is told why
// when not. It skips only when node or the examples' npm modules are
// absent (.ci/run installs them).
func TestAgentHostExamples(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	for _, m := range []string{"@openai/agents", "@langchain/langgraph", "tsx"} {
		if _, err := os.Stat(filepath.Join(agentHostsDir, "node_modules", m, "package.json")); err != nil {
			t.Skipf("npm modules absent (cd examples/agent-hosts && npm ci): %v", err)
		}
	}
	srv := startService(t, serviceOpts{Config: hookConfig()})
	var links []string
	printed := map[string]string{}

	runExample := func(t *testing.T, script, decision, reason string) (map[string]any, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "--import", "tsx", script)
		cmd.Dir = agentHostsDir
		cmd.Env = append(os.Environ(), "COUNTERSIGN_URL="+srv.URL(), "COUNTERSIGN_API_KEY="+srv.APIKey, "OPENAI_API_KEY=")
		out, errb := &syncBuffer{}, &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, errb
		must(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()

		key := pendingKeyOr(t, srv, done, errb)
		link := srv.consoleLink(t, key, "grace")
		links = append(links, link)
		if st, _ := newBrowser().decide(t, link, decision, reason); st != 200 {
			t.Fatalf("%s: %d", decision, st)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: %v\n%s\n%s", script, err, out.String(), errb.String())
		}
		printed[script+" "+decision] = out.String() + errb.String()
		var res map[string]any
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			t.Fatalf("%s printed %q (stderr %q)", script, out.String(), errb.String())
		}
		return res, key
	}
	inputOf := func(t *testing.T, key string) (host, tool string) {
		o := decode[op](t, mustCall(t, srv, "GET", "/v1/operations/"+key, "", 200))
		var in struct{ Host, Tool string }
		must(t, json.Unmarshal(o.Input, &in))
		return in.Host, in.Tool
	}

	t.Run("openai-agents approved", func(t *testing.T) {
		res, key := runExample(t, "openai-agents.ts", "approve", "")
		if out, _ := json.Marshal(res["toolOutputs"]); !strings.Contains(string(out), "deleted old-release in acme/app") {
			t.Errorf("the approved tool did not run: %v", res)
		}
		if host, tool := inputOf(t, key); host != "openai-agents" || tool != "delete_branch" {
			t.Errorf("operation asked for %s/%s", host, tool)
		}
	})
	t.Run("openai-agents rejected", func(t *testing.T) {
		res, _ := runExample(t, "openai-agents.ts", "reject", "keep it until Friday")
		out, _ := json.Marshal(res["toolOutputs"])
		if strings.Contains(string(out), "deleted") || !strings.Contains(string(out), "keep it until Friday") {
			t.Errorf("rejected: the tool ran, or the model was not told why: %v", res)
		}
	})
	t.Run("langgraph approved", func(t *testing.T) {
		res, key := runExample(t, "langgraph.ts", "approve", "")
		if res["outcome"] != "wrote 12 bytes to /srv/app/config.yaml" {
			t.Errorf("the approved tool did not run: %v", res)
		}
		if host, tool := inputOf(t, key); host != "langgraph" || tool != "write_file" {
			t.Errorf("operation asked for %s/%s", host, tool)
		}
	})
	t.Run("langgraph rejected", func(t *testing.T) {
		res, _ := runExample(t, "langgraph.ts", "reject", "wrong cluster")
		if res["outcome"] != "not run: grace rejected it: wrong cluster" {
			t.Errorf("rejected: %v", res)
		}
	})
	assertNoCapabilities(t, links, printed)
}

// pendingKeyOr is pendingKey for a process that may exit before asking.
func pendingKeyOr(t *testing.T, srv *testService, done <-chan error, stderr *syncBuffer) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		list := decode[struct {
			Operations []op `json:"operations"`
		}](t, mustCall(t, srv, "GET", "/v1/operations?status=pending_approval", "", 200))
		if len(list.Operations) > 0 {
			return list.Operations[0].Key
		}
		select {
		case err := <-done:
			t.Fatalf("the example ended before asking: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("the example asked for no approval:\n%s", stderr.String())
	return ""
}
