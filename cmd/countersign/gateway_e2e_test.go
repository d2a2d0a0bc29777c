package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/gateway"
	"github.com/countersign/countersign/internal/testing/mcpupstream"
	"github.com/countersign/countersign/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gatewayConfig is a policy whose agent reaches the upstreams (YAML list
// items, indented for upstreams:) only through countersign; grace approves
// every guarded call on the console.
func gatewayConfig(scopes, upstreams string) string {
	return gatewayPolicy(scopes, "", upstreams)
}

// gatewayPolicy is gatewayConfig with routes before grace's.
func gatewayPolicy(scopes, routes, upstreams string) string {
	return fmt.Sprintf(`
principals:
  - id: agent
    api_key_sha256: "%s"
    scopes: [%s]
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com}
  - {id: ada, name: Ada Byron, email: ada@example.com}
routes:
%s  - name: upstream writes
    match: {action: mcp.call}
    approvers: {ids: [grace]}
    notify: [console]
upstreams:
%s`, testKeyHash, scopes, routes, upstreams)
}

// yamlList is a command as a YAML flow list.
func yamlList(items []string) string {
	b, _ := json.Marshal(items)
	return string(b)
}

// waitUpstreams waits until /readyz reports every upstream up with tools.
func waitUpstreams(t testing.TB, s *testService) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, b := s.call(t, "GET", "/readyz", "", "")
		var body struct {
			Status    string           `json:"status"`
			Upstreams []map[string]any `json:"upstreams"`
		}
		_ = json.Unmarshal(b, &body)
		up := st == 200 && len(body.Upstreams) > 0
		for _, u := range body.Upstreams {
			if u["up"] != true || u["tools"] == float64(0) {
				up = false
			}
		}
		if up {
			return body.Upstreams
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstreams not up: %d %s\n%s", st, b, s.Stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// toolsByName lists the tools an MCP session sees.
func toolsByName(t testing.TB, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	lt, err := cs.ListTools(context.Background(), nil)
	must(t, err)
	out := map[string]*mcp.Tool{}
	for _, tl := range lt.Tools {
		out[tl.Name] = tl
	}
	return out
}

// callRaw calls a tool and returns its whole result.
func callRaw(t testing.TB, cs *mcp.ClientSession, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	return res
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// fieldsOf maps a preview's fields by name.
func fieldsOf(v approval.View) map[string]string {
	out := map[string]string{}
	for _, f := range v.Preview.Fields {
		out[f.Name] = f.Value
	}
	return out
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return "(absent)"
		}
		t.Fatal(err)
	}
	return string(b)
}

// TestGatewayFilesystemServer: an agent connected only to countersign, in
// front of the real @modelcontextprotocol/server-filesystem from npm,
// reads freely; every write waits for a human, shows the line diff against
// the file as it is, writes once when approved, is not made when the file
// changed before the approval, and is not made when rejected.
func TestGatewayFilesystemServer(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	file := filepath.Join(root, "plan.txt")
	must(t, os.WriteFile(file, []byte("one\ntwo\nthree\n"), 0o644))
	cmd := mcpupstream.FilesystemServer(t, root)
	srv := startService(t, serviceOpts{Config: gatewayPolicy(`"mcp:files"`, fmt.Sprintf(`  - name: finance files
    match: {action: mcp.call, target: files, tool: write_file, when: [{attr: args.path, matches: %q}]}
    approvers: {ids: [ada]}
    notify: [console]
`, root+"/finance/*"), fmt.Sprintf(`
  - name: files
    command: %s
    pass: [read_text_file, list_directory, list_allowed_directories, get_file_info]
    hide: [move_file]
    state:
      write_file: {tool: read_text_file, args: {path: "{path}"}, diff: content}
`, yamlList(cmd)))})
	ups := waitUpstreams(t, srv)
	if ups[0]["name"] != "files" || ups[0]["transport"] != "stdio" {
		t.Fatalf("readyz upstreams: %v", ups)
	}
	wire := &syncBuffer{}
	cs := mcpHTTP(t, srv, srv.APIKey, wire)
	var links []string

	t.Run("the agent sees the upstream's tools beside countersign's", func(t *testing.T) {
		tools := toolsByName(t, cs)
		read, write := tools["files__read_text_file"], tools["files__write_file"]
		if read == nil || write == nil || tools[mcpserver.ToolGetOperationStatus] == nil {
			t.Fatalf("tools: %v", keys(tools))
		}
		if tools["files__move_file"] != nil {
			t.Error("a hidden tool is offered")
		}
		if strings.HasPrefix(read.Description, gateway.Guarded) || !strings.HasPrefix(write.Description, gateway.Guarded) {
			t.Errorf("descriptions: read %q, write %q", read.Description, write.Description)
		}
		if write.Annotations == nil || write.Annotations.ReadOnlyHint {
			t.Errorf("a guarded tool must say it is not read-only: %+v", write.Annotations)
		}
	})

	t.Run("a read passes at once", func(t *testing.T) {
		res := callRaw(t, cs, "files__read_text_file", map[string]any{"path": file})
		if res.IsError || !strings.Contains(textOf(res), "two") {
			t.Fatalf("read: %v %q", res.IsError, textOf(res))
		}
	})

	write := func(t *testing.T, path, content string) approval.View {
		t.Helper()
		o := mcpOK(t, cs, "files__write_file", map[string]any{"path": path, "content": content})
		if o.op.Status != approval.StatusPending || o.op.Action != "mcp.call" {
			t.Fatalf("guarded call: %+v", o.op)
		}
		if !strings.Contains(o.text, "Nothing has run yet") {
			t.Errorf("text for the model: %q", o.text)
		}
		return o.op
	}

	t.Run("a write waits for a human, shows the diff, and writes once when approved", func(t *testing.T) {
		v := write(t, file, "one\nTWO\nthree\n")
		if got := readFile(t, file); got != "one\ntwo\nthree\n" {
			t.Fatalf("the file changed before approval: %q", got)
		}
		full := decode[approval.View](t, mustCall(t, srv, "GET", "/v1/operations/"+v.OperationKey+"?full=1", "", 200))
		f := fieldsOf(full)
		if f["upstream"] != "files" || f["tool"] != "write_file" || f["args.path"] != file || f["args.content"] != "one\nTWO\nthree\n" {
			t.Errorf("preview fields: %v", f)
		}
		if !strings.Contains(f["state.now"], "two") || !strings.Contains(f["state.diff"], "-two") || !strings.Contains(f["state.diff"], "+TWO") {
			t.Errorf("state and diff: now %q diff %q", f["state.now"], f["state.diff"])
		}
		if f["tool.description"] == "" {
			t.Error("the tool's own description is not shown")
		}
		var in struct {
			ToolSHA256 string `json:"tool_sha256"`
		}
		must(t, json.Unmarshal(full.Input, &in))
		if len(in.ToolSHA256) != 64 {
			t.Errorf("tool_sha256 = %q", in.ToolSHA256)
		}
		link := srv.consoleLink(t, v.OperationKey, "grace")
		links = append(links, link)
		if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
			t.Fatalf("approve: %d", st)
		}
		done := mcpWaitStatus(t, cs, v.OperationKey, approval.StatusSucceeded)
		if got := readFile(t, file); got != "one\nTWO\nthree\n" {
			t.Fatalf("after approval the file is %q", got)
		}
		if !strings.Contains(string(done.Result), "content") {
			t.Errorf("result: %s", done.Result)
		}
	})

	t.Run("a file changed before the approval is not overwritten", func(t *testing.T) {
		v := write(t, file, "overwritten\n")
		must(t, os.WriteFile(file, []byte("someone else's edit\n"), 0o644))
		link := srv.consoleLink(t, v.OperationKey, "grace")
		links = append(links, link)
		approveIfOffered(t, link)
		done := mcpWaitStatus(t, cs, v.OperationKey, approval.StatusFailed)
		if done.Error == nil || done.Error.Code != approval.CodeStaleState {
			t.Fatalf("error: %+v", done.Error)
		}
		if got := readFile(t, file); got != "someone else's edit\n" {
			t.Fatalf("the file is %q", got)
		}
	})

	t.Run("a rejection leaves it untouched", func(t *testing.T) {
		other := filepath.Join(root, "new.txt")
		v := write(t, other, "never\n")
		link := srv.consoleLink(t, v.OperationKey, "grace")
		links = append(links, link)
		if st, _ := newBrowser().decide(t, link, "reject", "not now"); st != 200 {
			t.Fatalf("reject: %d", st)
		}
		mcpWaitStatus(t, cs, v.OperationKey, approval.StatusRejected)
		if got := readFile(t, other); got != "(absent)" {
			t.Fatalf("rejected write made the file: %q", got)
		}
	})

	t.Run("REST: GET /v1/tools and POST /v1/tools/call", func(t *testing.T) {
		var list struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		must(t, json.Unmarshal(mustCall(t, srv, "GET", "/v1/tools", "", 200), &list))
		names := map[string]bool{}
		for _, tl := range list.Tools {
			names[tl.Name] = true
		}
		if !names["files__write_file"] || !names[mcpserver.ToolSendOperation] {
			t.Errorf("GET /v1/tools: %v", names)
		}
		body := fmt.Sprintf(`{"name":"files__read_text_file","arguments":{"path":%q}}`, file)
		if raw := mustCall(t, srv, "POST", "/v1/tools/call", body, 200); !strings.Contains(string(raw), "someone else") {
			t.Errorf("pass over REST: %s", raw)
		}
		body = fmt.Sprintf(`{"name":"files__write_file","arguments":{"path":%q,"content":"x"}}`, filepath.Join(root, "rest.txt"))
		raw := mustCall(t, srv, "POST", "/v1/tools/call", body, 202)
		if !strings.Contains(string(raw), `"pending_approval"`) {
			t.Errorf("guarded over REST: %s", raw)
		}
		mustCall(t, srv, "POST", "/v1/tools/call", `{"name":"files__move_file","arguments":{}}`, 404)
	})

	t.Run("REST: mcp.call prepared and sent like any action; routes read the arguments", func(t *testing.T) {
		body := fmt.Sprintf(`{"action":"mcp.call","input":{"upstream":"files","tool":"write_file","arguments":{"path":%q,"content":"q3"}}}`,
			filepath.Join(root, "finance", "q3.txt"))
		draft := decode[approval.View](t, mustCall(t, srv, "POST", "/v1/operations", body, 201))
		if draft.Status != approval.StatusDraft || !slices.Equal(draft.Approval.Approvers, []string{"ada"}) {
			t.Fatalf("draft: %s %v (the finance route names ada)", draft.Status, draft.Approval.Approvers)
		}
		sent := decode[approval.View](t, mustCall(t, srv, "POST", "/v1/operations/"+draft.OperationKey+"/send", "", 202))
		if sent.Status != approval.StatusPending {
			t.Fatalf("sent: %s", sent.Status)
		}
		mustCall(t, srv, "POST", "/v1/operations/"+draft.OperationKey+"/cancel", "", 200)
		if st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, `{"action":"mcp.call","input":{"upstream":"files","tool":"move_file","arguments":{}}}`); st != 400 {
			t.Fatalf("a hidden tool over REST: %d %s", st, b)
		}
	})

	assertNoCapabilities(t, links, map[string]string{"mcp wire": wire.String()})
}

// TestGatewayMemoryServerOnce: create_entities on the real
// @modelcontextprotocol/server-memory runs exactly once after approval.
// The server keeps its graph in its process, so this is one replica
// (docs/gateway.md says why).
func TestGatewayMemoryServerOnce(t *testing.T) {
	cmd := mcpupstream.MemoryServer(t, filepath.Join(t.TempDir(), "memory.jsonl"))
	srv := startService(t, serviceOpts{Config: gatewayConfig(`"mcp:memory"`, fmt.Sprintf(`
  - name: memory
    command: %s
    pass: [read_graph, search_nodes, open_nodes]
`, yamlList(cmd)))})
	waitUpstreams(t, srv)
	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	o := mcpOK(t, cs, "memory__create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "Ada", "entityType": "person", "observations": []any{"wrote the first program"}}}})
	if o.op.Status != approval.StatusPending {
		t.Fatalf("create_entities: %+v", o.op)
	}
	if g := textOf(callRaw(t, cs, "memory__read_graph", map[string]any{})); strings.Contains(g, "Ada") {
		t.Fatalf("the entity exists before approval: %s", g)
	}
	link := srv.consoleLink(t, o.op.OperationKey, "grace")
	// Two approvals of the same link at once: one decision, one call.
	done := make(chan struct{}, 2)
	for range 2 {
		go func() { newBrowser().decide(t, link, "approve", ""); done <- struct{}{} }()
	}
	<-done
	<-done
	mcpWaitStatus(t, cs, o.op.OperationKey, approval.StatusSucceeded)
	g := textOf(callRaw(t, cs, "memory__read_graph", map[string]any{}))
	if n := strings.Count(g, `"name": "Ada"`) + strings.Count(g, `"name":"Ada"`); n != 1 {
		t.Fatalf("Ada appears %d times in the graph: %s", n, g)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// approveIfOffered opens the approval page and approves if the page still
// offers it: a page that found the state moved on ends the operation at
// once and offers nothing to approve.
func approveIfOffered(t testing.TB, link string) {
	t.Helper()
	b := newBrowser()
	st, page, _ := b.do(t, "GET", link, nil)
	if st == 409 {
		return // the page found the tool or state moved on, and ended it
	}
	if st != 200 {
		t.Fatalf("open %s: %d", link, st)
	}
	if m := csrfRE.FindStringSubmatch(page); m != nil {
		b.do(t, "POST", link, url.Values{"_csrf": {m[1]}, "decision": {"approve"}})
	}
}
