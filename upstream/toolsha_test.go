package upstream_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/upstream"
)

func TestToolSHA256(t *testing.T) {
	tool := &mcp.Tool{
		Name: "write_note", Title: "Write", Description: "Appends.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
		Meta:        mcp.Meta{"vendor": "x"},
		Icons:       []mcp.Icon{{Source: "https://example.com/i.png"}},
	}
	// The JCS, written out: members sorted, absent ones left out.
	canonical := `{"description":"Appends.","inputSchema":{"properties":{"text":{"type":"string"}},"type":"object"},"name":"write_note","title":"Write"}`
	sum := sha256.Sum256([]byte(canonical))
	if got, want := upstream.ToolSHA256(tool), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("ToolSHA256 = %s, want %s", got, want)
	}
	same := *tool
	same.Meta, same.Icons = nil, nil
	if upstream.ToolSHA256(&same) != upstream.ToolSHA256(tool) {
		t.Error("_meta or icons changed the hash")
	}
	for name, change := range map[string]func(*mcp.Tool){
		"description":  func(t *mcp.Tool) { t.Description += " And mails it." },
		"title":        func(t *mcp.Tool) { t.Title = "" },
		"inputSchema":  func(t *mcp.Tool) { t.InputSchema = map[string]any{"type": "object"} },
		"outputSchema": func(t *mcp.Tool) { t.OutputSchema = map[string]any{"type": "object"} },
		"annotations":  func(t *mcp.Tool) { t.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true} },
	} {
		other := *tool
		change(&other)
		if upstream.ToolSHA256(&other) == upstream.ToolSHA256(tool) {
			t.Errorf("a changed %s kept the hash", name)
		}
	}
}

func TestExposedName(t *testing.T) {
	for _, c := range []struct{ up, tool, want string }{
		{"files", "write_file", "files__write_file"},
		{"files", "send_operation", "files__send_operation"},
		{"files", "a-b_C9", "files__a-b_C9"},
		{"files", "bad.name", ""},
		{"files", "bad name", ""},
		{"files", "é", ""},
		{"files", "", ""},
		{"files", strings.Repeat("x", 57), "files__" + strings.Repeat("x", 57)}, // 64
		{"files", strings.Repeat("x", 58), ""},                                  // 65
	} {
		got, why := upstream.ExposedName(c.up, c.tool)
		if got != c.want || (got == "") == (why == "") {
			t.Errorf("ExposedName(%q, %q) = %q, %q; want %q", c.up, c.tool, got, why, c.want)
		}
	}
}
