package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBatchRefused: one HTTP request is one call (SPEC §3 guarantee 10 is
// per request): a JSON-RPC batch of prepares is refused with -32600 and
// stores nothing, whatever protocol version the client announces (the SDK
// takes batches from clients of 2025-03-26 and earlier, or that announce
// none). The same prepare sent alone works.
func TestBatchRefused(t *testing.T) {
	h := newHarness(t)
	url := h.httpURL(t)
	call := func(id int) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
			"params": map[string]any{"name": "prepare_email", "arguments": emailArgs(map[string]any{"subject": fmt.Sprint("Invoice ", id)})}}
	}
	post := func(body []byte, version string) (int, string) {
		req, err := http.NewRequest("POST", url, bytes.NewReader(body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+agentKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var batch []any
	for i := range 200 {
		batch = append(batch, call(i+1))
	}
	body, _ := json.Marshal(batch)
	for _, version := range []string{"", "2024-11-05", "2025-03-26", "2025-06-18"} {
		for _, b := range [][]byte{body, append([]byte(" \n\t"), body...)} {
			st, got := post(b, version)
			var e struct {
				Error struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if st != http.StatusBadRequest || json.Unmarshal([]byte(got), &e) != nil || e.Error.Code != -32600 {
				t.Errorf("batch of 200 prepares (%d bytes), version %q: %d %.200s", len(b), version, st, got)
			}
		}
	}
	ops, err := h.svc.List(context.Background(), h.agent, "")
	must(t, err)
	if len(ops) != 0 {
		t.Fatalf("a refused batch stored %d operations", len(ops))
	}
	one, _ := json.Marshal(call(1))
	if st, got := post(one, "2025-03-26"); st != http.StatusOK || !strings.Contains(got, `"op_`) {
		t.Fatalf("a single prepare: %d %.300s", st, got)
	}
}
