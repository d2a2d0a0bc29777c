package mcpserver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectorStrict runs the MCP Inspector's CLI (testdata/inspector,
// @modelcontextprotocol/inspector pinned in its package-lock.json) against
// /mcp in strict mode: its tool-schema portability rules (type unions,
// untyped schemas, remote $refs, boolean schemas) must find nothing, over
// every tool there is.
//
//	(cd mcpserver/testdata/inspector && npm ci) && go test -run TestInspectorStrict ./mcpserver
//
// It skips without node or the installed Inspector, unless
// COUNTERSIGN_REQUIRE_INSPECTOR=1 (CI installs it).
func TestInspectorStrict(t *testing.T) {
	dir, _ := filepath.Abs("testdata/inspector")
	bin := filepath.Join(dir, "node_modules", ".bin", "inspector")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if os.Getenv("COUNTERSIGN_REQUIRE_INSPECTOR") == "1" {
			t.Fatalf("the Inspector is required but not installed: %v", err)
		}
		t.Skip("node or the MCP Inspector is not installed: run npm ci in mcpserver/testdata/inspector")
	}
	h := newHarness(t)
	cmd := exec.Command(node, bin, "--cli", h.httpURL(t), "--transport", "http",
		"--header", "Authorization: Bearer "+agentKey, "--method", "tools/list", "--strict")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "mcp.json"), "NO_COLOR=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspector: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"prepare_email"`) || !strings.Contains(stdout.String(), `"prepare_http_request"`) {
		t.Fatalf("the Inspector did not list the tools:\n%s", stdout.String())
	}
	if s := stderr.String(); strings.Contains(s, "Warning:") || strings.Contains(s, "Error:") || strings.Contains(s, "Schema portability") {
		t.Errorf("the Inspector in strict mode reports:\n%s", s)
	}
}
