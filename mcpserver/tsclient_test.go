package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// TestTypeScriptSDKClient drives /mcp with the official TypeScript SDK
// client (testdata/tsclient/client.mjs): connect without a key (refused),
// list tools, prepare_email (the SDK validates structured content against
// the output schema), send, a bad wait_seconds, then a long-poll that the
// test wakes by approving as the human.
//
// It runs only where node is installed and the SDK has been fetched:
//
//	(cd mcpserver/testdata/tsclient && npm ci) && go test -run TestTypeScriptSDKClient ./mcpserver
func TestTypeScriptSDKClient(t *testing.T) {
	type callResult struct {
		IsError    bool           `json:"isError"`
		Text       string         `json:"text"`
		Structured map[string]any `json:"structured"`
	}
	h := newHarness(t)
	steps, out := runTSClient(t, "client.mjs", []string{"MCP_URL=" + h.httpURL(t)}, 60*time.Second, func(step string, value json.RawMessage) {
		if step == "waiting" {
			var key string
			must(t, json.Unmarshal(value, &key))
			time.Sleep(200 * time.Millisecond)
			h.approve(t, key, true, "")
		}
	})

	if u := string(steps["unauthenticated"]); !strings.Contains(u, "unauthenticated") {
		t.Errorf("without a key: %s", u)
	}
	var tools []struct {
		Name            string `json:"name"`
		HasOutputSchema bool   `json:"hasOutputSchema"`
	}
	must(t, json.Unmarshal(steps["tools"], &tools))
	// Every tool the Go server registers reaches the TypeScript client,
	// each with its output schema.
	if len(tools) != 9 {
		t.Errorf("%d tools: %+v", len(tools), tools)
	}
	for _, tool := range tools {
		if !tool.HasOutputSchema {
			t.Errorf("%s has no output schema over the TS SDK", tool.Name)
		}
	}
	var prep, bad, status callResult
	must(t, json.Unmarshal(steps["prepare"], &prep))
	must(t, json.Unmarshal(steps["bad"], &bad))
	must(t, json.Unmarshal(steps["status"], &status))
	if prep.IsError || prep.Structured["status"] != "draft" || !strings.Contains(prep.Text, "send_operation") {
		t.Errorf("prepare over the TS SDK: %+v", prep)
	}
	if e, _ := bad.Structured["error"].(map[string]any); !bad.IsError || e["code"] != "invalid_input" {
		t.Errorf("bad wait_seconds over the TS SDK: %+v", bad)
	}
	if st := status.Structured["status"]; status.IsError || st == string(approval.StatusPending) || st == nil {
		t.Errorf("long-poll over the TS SDK: %+v", status)
	}
	assertNoSecrets(t, h.secrets(), map[string]string{"TypeScript client output": out})
}

// runTSClient runs script of testdata/tsclient with the agent's key and
// env, and returns its steps: each stdout line is {"step", "value"}, and
// onStep sees each as it arrives, so that the test can act as the human.
// It skips where node or the SDK is not installed.
func runTSClient(t *testing.T, script string, env []string, timeout time.Duration, onStep func(step string, value json.RawMessage)) (steps map[string]json.RawMessage, out string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir, _ := filepath.Abs("testdata/tsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("the TypeScript SDK is not installed: run npm ci in mcpserver/testdata/tsclient")
	}
	cmd := exec.Command(node, script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "API_KEY="+agentKey), env...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	steps = map[string]json.RawMessage{}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var all strings.Builder
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
				}
				return steps, all.String()
			}
			all.WriteString(line + "\n")
			var s struct {
				Step  string          `json:"step"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatalf("not a step: %q", line)
			}
			steps[s.Step] = s.Value
			onStep(s.Step, s.Value)
		case <-deadline:
			t.Fatalf("the TypeScript client (%s) did not finish; stderr:\n%s\nout:\n%s", script, stderr.String(), all.String())
		}
	}
}
