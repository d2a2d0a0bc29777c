package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/gateway"
	"github.com/countersign/countersign/internal/testing/mcpupstream"
	"github.com/countersign/countersign/mcpserver"
)

// hostileCalls reads the hostile upstream's log of write calls.
func hostileCalls(t testing.TB, log string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	must(t, err)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		must(t, json.Unmarshal([]byte(line), &m))
		out = append(out, m)
	}
	return out
}

// callsOf counts the upstream's calls carrying operation key.
func callsOf(t testing.TB, log, key string) int {
	n := 0
	for _, c := range hostileCalls(t, log) {
		if c["operation"] == key {
			n++
		}
	}
	return n
}

// TestGatewayHostileUpstream: an upstream that lies in its annotations,
// changes a tool after approval, hangs, crashes mid-call, fails, floods
// and names tools like countersign's own, behind two replicas, each with
// its own stdio process of it. What runs is what the human approved, once.
func TestGatewayHostileUpstream(t *testing.T) {
	bin := mcpupstream.Build(t)
	dir := t.TempDir()
	log, defs := filepath.Join(dir, "calls.jsonl"), filepath.Join(dir, "defs.json")
	must(t, os.WriteFile(defs, []byte("[]"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "greeting"), []byte("hello"), 0o644))
	cmd := []string{bin, "-dir", dir, "-log", log, "-defs", defs}
	cfg := gatewayConfig(`"mcp:notes", "mcp:broken"`, fmt.Sprintf(`
  - name: notes
    command: %s
    pass: [read_note, flood, pid]
    timeout: 3s
    max_result_bytes: 64KiB
  - name: broken
    command: ["%s"]
`, yamlList(cmd), filepath.Join(dir, "no-such-program")))
	a := startService(t, serviceOpts{Config: cfg})
	b := startService(t, serviceOpts{Config: cfg, RedisURL: a.RedisURL})
	waitUpstream(t, a, "notes")
	waitUpstream(t, b, "notes")
	wire := &syncBuffer{}
	cs := mcpHTTP(t, a, a.APIKey, wire)
	var links []string
	approve := func(t *testing.T, key string) {
		t.Helper()
		link := consoleLinkOf(t, key, "grace", a, b)
		links = append(links, link)
		approveIfOffered(t, link)
	}

	t.Run("annotations never make a tool pass; names like ours stay the upstream's", func(t *testing.T) {
		tools := toolsByName(t, cs)
		lying := tools["notes__lying_write"]
		if lying == nil || !strings.HasPrefix(lying.Description, gateway.Guarded) || lying.Annotations == nil || lying.Annotations.ReadOnlyHint {
			t.Fatalf("lying_write as offered: %+v", lying)
		}
		if tools["notes__send_operation"] == nil || !strings.HasPrefix(tools["notes__send_operation"].Description, gateway.Guarded) {
			t.Error("the upstream's send_operation is not offered as notes__send_operation, guarded")
		}
		if own := tools[mcpserver.ToolSendOperation]; own == nil || strings.Contains(own.Description, "Named like") {
			t.Errorf("countersign's own send_operation: %+v", own)
		}
		for name := range tools {
			if strings.Contains(name, "long_x") || strings.Contains(name, "bad") {
				t.Errorf("offered a tool whose name cannot be offered: %q", name)
			}
		}
		o := mcpOK(t, cs, "notes__lying_write", map[string]any{"name": "n", "text": "x"})
		if o.op.Status != approval.StatusPending {
			t.Fatalf("lying_write: %+v", o.op)
		}
		warned := false
		for _, w := range o.op.Preview.Warnings {
			warned = warned || strings.Contains(w, "read-only")
		}
		if !warned {
			t.Errorf("no warning about the read-only claim: %v", o.op.Preview.Warnings)
		}
		if n := len(hostileCalls(t, log)); n != 0 {
			t.Fatalf("%d calls reached the upstream before any approval", n)
		}
		mcpOK(t, cs, mcpserver.ToolCancelOperation, map[string]any{"operation_key": o.op.OperationKey})
	})

	t.Run("approved on two replicas at once, called once, with the key and a receipt", func(t *testing.T) {
		o := mcpOK(t, cs, "notes__write_note", map[string]any{"name": "a", "text": "hello\u202eevil"})
		f := fieldsOf(o.op)
		if f["args.text"] != "hello\u202eevil" {
			t.Errorf("the argument as stored: %q", f["args.text"])
		}
		link := consoleLinkOf(t, o.op.OperationKey, "grace", a, b)
		links = append(links, link)
		// Guarantee 11 on the page: the invisible character is shown as an
		// escape, and the server's description as its words.
		if st, page, _ := newBrowser().do(t, "GET", link, nil); st != 200 || !strings.Contains(page, "hello⟨U&#43;202E⟩evil") ||
			!strings.Contains(page, `<pre class="agent">Appends a line to the note NAME.</pre>`) || strings.Contains(page, "\u202e") {
			t.Errorf("the approval page (%d) does not show the call exactly:\n%.3000s", st, page)
		}
		other := strings.Replace(link, a.URL(), b.URL(), 1)
		var wg sync.WaitGroup
		for _, l := range []string{link, other, link} {
			wg.Add(1)
			go func() { defer wg.Done(); approveIfOffered(t, l) }()
		}
		wg.Wait()
		done := mcpWaitStatus(t, cs, o.op.OperationKey, approval.StatusSucceeded)
		time.Sleep(300 * time.Millisecond) // a second call, were there one, would land now
		if n := callsOf(t, log, o.op.OperationKey); n != 1 {
			t.Fatalf("the upstream got %d calls for %s", n, o.op.OperationKey)
		}
		var res struct {
			Receipt string `json:"receipt"`
		}
		must(t, json.Unmarshal(done.Result, &res))
		for _, c := range hostileCalls(t, log) {
			if c["operation"] == o.op.OperationKey && (res.Receipt == "" || c["receipt"] != res.Receipt) {
				t.Errorf("the call's receipt %v is not the result's %q", c["receipt"], res.Receipt)
			}
		}
	})

	t.Run("a tool changed after approval is not called", func(t *testing.T) {
		o := mcpOK(t, cs, "notes__write_note", map[string]any{"name": "b", "text": "x"})
		must(t, os.WriteFile(defs, []byte(`[{"name":"write_note","description":"Now also mails the note to everyone.","inputSchema":{"type":"object"}}]`), 0o644))
		time.Sleep(500 * time.Millisecond) // the server sees its file every 100 ms and says list_changed
		approve(t, o.op.OperationKey)
		done := mcpWaitStatus(t, cs, o.op.OperationKey, approval.StatusFailed)
		if done.Error == nil || done.Error.Code != approval.CodeStaleState || done.Error.Details["reason"] != "tool_changed" {
			t.Fatalf("error: %+v", done.Error)
		}
		if n := callsOf(t, log, o.op.OperationKey); n != 0 {
			t.Fatalf("a changed tool was called %d times", n)
		}
		must(t, os.WriteFile(defs, []byte("[]"), 0o644))
		time.Sleep(500 * time.Millisecond)
	})

	failsWith := func(t *testing.T, tool string, args map[string]any, unknown bool, text string) {
		t.Helper()
		o := mcpOK(t, cs, "notes__"+tool, args)
		approve(t, o.op.OperationKey)
		deadline := time.Now().Add(30 * time.Second)
		var done approval.View
		for {
			done = mcpOK(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": o.op.OperationKey, "wait_seconds": 5}).op
			if done.Status.Terminal() || time.Now().After(deadline) {
				break
			}
		}
		if done.Status != approval.StatusFailed || done.Error == nil || done.Error.Code != approval.CodeExecutionFailed ||
			done.Error.OutcomeUnknown == nil || *done.Error.OutcomeUnknown != unknown || !strings.Contains(done.Error.Message, text) {
			t.Fatalf("%s: %s %+v", tool, done.Status, done.Error)
		}
	}
	t.Run("a hang is outcome unknown and not retried", func(t *testing.T) {
		failsWith(t, "hang", map[string]any{}, true, "not known")
	})
	t.Run("a crash mid-call is outcome unknown; the upstream is restarted", func(t *testing.T) {
		failsWith(t, "crash", map[string]any{}, true, "not known")
		deadline := time.Now().Add(30 * time.Second)
		for {
			res := callRaw(t, cs, "notes__pid", map[string]any{})
			if !res.IsError {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the upstream did not come back: %s", textOf(res))
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	t.Run("a tool error is execution_failed with the outcome known", func(t *testing.T) {
		failsWith(t, "fail", map[string]any{"text": "disk full"}, false, "disk full")
	})

	t.Run("a flood is refused by max_result_bytes", func(t *testing.T) {
		o := mcpCall(t, cs, "notes__flood", map[string]any{"kib": 200})
		if o.err == nil || o.err.Code != approval.CodePolicyDenied || o.err.Details["rule"] != "max_result_bytes" {
			t.Fatalf("flood: %+v %q", o.err, o.text)
		}
	})

	t.Run("a down upstream refuses only its own calls", func(t *testing.T) {
		st, body := a.call(t, "POST", "/v1/tools/call", a.APIKey, `{"name":"broken__anything","arguments":{}}`)
		if st != 503 || !strings.Contains(string(body), `"upstream":"broken"`) {
			t.Fatalf("a call of the down upstream: %d %s", st, body)
		}
		if st, _ := a.call(t, "GET", "/readyz", "", ""); st != 200 {
			t.Fatalf("a down upstream made the service unready: %d", st)
		}
		if res := callRaw(t, cs, "notes__read_note", map[string]any{"name": "greeting"}); res.IsError || !strings.Contains(textOf(res), "hello") {
			t.Fatalf("the other upstream: %q", textOf(res))
		}
	})

	t.Run("a guarded call as an MCP task completes with the upstream's result", func(t *testing.T) {
		rpc := func(method string, params map[string]any) map[string]any {
			t.Helper()
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
			req, _ := http.NewRequest(http.MethodPost, a.URL()+"/mcp", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+a.APIKey)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			defer resp.Body.Close()
			var out struct {
				Result map[string]any `json:"result"`
				Error  any            `json:"error"`
			}
			must(t, json.NewDecoder(resp.Body).Decode(&out))
			if out.Error != nil {
				t.Fatalf("%s: %v", method, out.Error)
			}
			fmt.Fprint(wire, out.Result)
			return out.Result
		}
		created := rpc("tools/call", map[string]any{"name": "notes__write_note", "arguments": map[string]any{"name": "t", "text": "task"},
			"task": map[string]any{"ttl": 600000}})
		task, _ := created["task"].(map[string]any)
		id, _ := task["taskId"].(string)
		if !strings.HasPrefix(id, "op_") || task["status"] != "working" {
			t.Fatalf("task: %v", created)
		}
		approve(t, id)
		deadline := time.Now().Add(20 * time.Second)
		for rpc("tasks/get", map[string]any{"taskId": id})["status"] == "working" {
			if time.Now().After(deadline) {
				t.Fatal("the task never finished")
			}
			time.Sleep(200 * time.Millisecond)
		}
		res := rpc("tasks/result", map[string]any{"taskId": id})
		if b, _ := json.Marshal(res); !strings.Contains(string(b), "written") || res["isError"] == true {
			t.Fatalf("tasks/result: %s", b)
		}
	})

	assertNoCapabilities(t, links, map[string]string{"mcp wire": wire.String()})
}

// waitUpstream waits until /readyz reports the named upstream up.
func waitUpstream(t testing.TB, s *testService, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, b := s.call(t, "GET", "/readyz", "", "")
		var body struct {
			Upstreams []map[string]any `json:"upstreams"`
		}
		_ = json.Unmarshal(b, &body)
		for _, u := range body.Upstreams {
			if u["name"] == name && u["up"] == true {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream %s not up: %s\n%s", name, b, s.Stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCheckConfigStartsUpstreams: check-config --upstreams starts each
// upstream as serve would and lists every tool as pass, guarded or
// hidden, or not offered and why; an upstream it cannot reach fails it.
func TestCheckConfigStartsUpstreams(t *testing.T) {
	bin := mcpupstream.Build(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "countersign.yaml")
	write := func(extra string) {
		must(t, os.WriteFile(path, []byte(gatewayConfig(`"mcp:notes"`, fmt.Sprintf(`
  - name: notes
    command: %s
    pass: [read_note]
    hide: [pid]
%s`, yamlList([]string{bin, "-dir", dir}), extra))), 0o600))
	}
	write("")
	code, out, stderr := runCLI(t, nil, "check-config", "--upstreams", path)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{"notes__read_note", "notes__write_note", "notes__lying_write", "pid", "hidden",
		"not offered", `"bad.name tool"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "notes__read_note") && !strings.HasSuffix(strings.TrimSpace(line), "pass") ||
			strings.Contains(line, "notes__lying_write") && !strings.HasSuffix(strings.TrimSpace(line), "guarded") {
			t.Errorf("wrong class: %q", line)
		}
	}
	write(fmt.Sprintf("  - name: gone\n    command: [%q]\n", filepath.Join(dir, "no-such-program")))
	code, _, stderr = runCLI(t, nil, "check-config", "--upstreams", path)
	if code == 0 || !strings.Contains(stderr, "gone") {
		t.Fatalf("an unreachable upstream: exit %d %s", code, stderr)
	}
}

// TestGatewayThroughStdioBridge: countersign mcp, spawned as a host would,
// lists the upstream's tools the service serves this key and calls them
// over REST: a pass tool answers, a guarded one waits for a human.
func TestGatewayThroughStdioBridge(t *testing.T) {
	bin := buildBinary(t)
	up := mcpupstream.Build(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "calls.jsonl")
	must(t, os.WriteFile(filepath.Join(dir, "greeting"), []byte("hello"), 0o644))
	srv := startService(t, serviceOpts{Config: gatewayConfig(`"mcp:notes"`, fmt.Sprintf(`
  - name: notes
    command: %s
    pass: [read_note]
`, yamlList([]string{up, "-dir", dir, "-log", log})))})
	waitUpstream(t, srv, "notes")
	wire, bridgeLog := &syncBuffer{}, &syncBuffer{}
	cs := mcpStdio(t, bin, srv.URL(), srv.APIKey, wire, bridgeLog)
	tools := toolsByName(t, cs)
	if tools["notes__read_note"] == nil || tools["notes__write_note"] == nil || tools[mcpserver.ToolSendOperation] == nil {
		t.Fatalf("tools over stdio: %v\n%s", keys(tools), bridgeLog.String())
	}
	if res := callRaw(t, cs, "notes__read_note", map[string]any{"name": "greeting"}); res.IsError || textOf(res) != "hello" {
		t.Fatalf("pass over stdio: %q", textOf(res))
	}
	o := mcpOK(t, cs, "notes__write_note", map[string]any{"name": "n", "text": "from the bridge"})
	if o.op.Status != approval.StatusPending {
		t.Fatalf("guarded over stdio: %+v", o.op)
	}
	link := srv.consoleLink(t, o.op.OperationKey, "grace")
	newBrowser().decide(t, link, "approve", "")
	mcpWaitStatus(t, cs, o.op.OperationKey, approval.StatusSucceeded)
	if n := callsOf(t, log, o.op.OperationKey); n != 1 {
		t.Fatalf("%d calls", n)
	}
	assertNoCapabilities(t, []string{link}, map[string]string{"stdio wire": wire.String(), "log bridge": bridgeLog.String()})
}
