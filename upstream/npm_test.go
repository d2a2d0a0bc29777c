package upstream_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/mcpupstream"
	"github.com/countersign/countersign/upstream"
)

// The real @modelcontextprotocol/server-filesystem, as SPEC §12's example
// configures it.
func TestFilesystemServer(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "note.txt"), []byte("first line\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := upstream.Spec{
		Name:    "files",
		Command: mcpupstream.FilesystemServer(t, root),
		Pass:    []string{"read_text_file", "list_directory", "search_files", "get_file_info"},
		Hide:    []string{"move_file"},
		Timeout: 20 * time.Second,
	}
	p := start(t, upstream.Options{}, spec)
	tools, err := p.Tools("files")
	if err != nil {
		t.Fatalf("Tools: %v (status %+v)", err, p.Status())
	}
	classes := map[string]upstream.Class{}
	for _, tool := range tools {
		classes[tool.Name] = tool.Class
	}
	for name, want := range map[string]upstream.Class{
		"read_text_file": upstream.Pass, "list_directory": upstream.Pass, "get_file_info": upstream.Pass,
		"write_file": upstream.Guarded, "edit_file": upstream.Guarded, "move_file": upstream.Hidden,
		// Annotated readOnlyHint, not in pass: guarded all the same.
		"read_multiple_files": upstream.Guarded,
	} {
		if got, ok := classes[name]; !ok || got != want {
			t.Errorf("%s: class %q (listed %v), want %q", name, got, ok, want)
		}
	}
	if tool := mustTool(t, p, "files", "write_file"); tool.Exposed != "files__write_file" || tool.Def.InputSchema == nil {
		t.Errorf("write_file = %+v", tool)
	}

	res, err := p.Call(ctxT(t, 20*time.Second), "files", "read_text_file", mustJSON(t, map[string]any{"path": filepath.Join(root, "note.txt")}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Text != "first line\nsecond line\n" {
		t.Errorf("read_text_file = %+v", res)
	}

	target := filepath.Join(root, "written.txt")
	res, err = p.Call(ctxT(t, 20*time.Second), "files", "write_file", mustJSON(t, map[string]any{"path": target, "content": "approved content"}),
		map[string]any{"io.countersign/operation": "op_w"})
	if err != nil || res.IsError {
		t.Fatalf("write_file = %+v, %v", res, err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "approved content" {
		t.Errorf("written file = %q, %v", b, err)
	}

	res, err = p.Call(ctxT(t, 20*time.Second), "files", "read_text_file", mustJSON(t, map[string]any{"path": "/etc/passwd"}), nil)
	if err != nil || !res.IsError || res.Text == "" {
		t.Errorf("read outside the root = %+v, %v; want an isError result", res, err)
	}
}

func TestMemoryServer(t *testing.T) {
	file := filepath.Join(t.TempDir(), "memory.jsonl")
	spec := upstream.Spec{Name: "memory", Command: mcpupstream.MemoryServer(t, file), Timeout: 20 * time.Second}
	p := start(t, upstream.Options{}, spec)
	if _, err := p.Tools("memory"); err != nil {
		t.Fatalf("Tools: %v (status %+v)", err, p.Status())
	}
	entities := map[string]any{"entities": []map[string]any{{"name": "ledger-7", "entityType": "account", "observations": []string{"opened in 2026"}}}}
	res, err := p.Call(ctxT(t, 20*time.Second), "memory", "create_entities", mustJSON(t, entities), nil)
	if err != nil || res.IsError {
		t.Fatalf("create_entities = %+v, %v", res, err)
	}
	res, err = p.Call(ctxT(t, 20*time.Second), "memory", "read_graph", nil, nil)
	if err != nil || res.IsError {
		t.Fatalf("read_graph = %+v, %v", res, err)
	}
	var graph struct {
		Entities []struct{ Name string } `json:"entities"`
	}
	if err := json.Unmarshal(res.Structured, &graph); err != nil {
		t.Fatalf("structured %s: %v", res.Structured, err)
	}
	if !slices.ContainsFunc(graph.Entities, func(e struct{ Name string }) bool { return e.Name == "ledger-7" }) || !strings.Contains(res.Text, "opened in 2026") {
		t.Errorf("read_graph = %s / %q", res.Structured, res.Text)
	}
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), "ledger-7") {
		t.Errorf("memory file = %q, %v", b, err)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
