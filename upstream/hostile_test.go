package upstream_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/upstream"
)

func TestHostileToolList(t *testing.T) {
	spec, _ := hostile(t, "hostile")
	spec.Pass = []string{"read_note"}
	spec.Hide = []string{"pid"}
	p := start(t, upstream.Options{}, spec)

	tools, err := p.Tools("hostile")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]upstream.Tool{}
	for _, tool := range tools {
		byName[tool.Name] = tool
		if tool.Upstream != "hostile" || len(tool.SHA256) != 64 || tool.Def == nil {
			t.Errorf("tool %q: %+v", tool.Name, tool)
		}
	}
	long := "long" + strings.Repeat("_x", 33)
	for _, c := range []struct {
		name, exposed, why string
		class              upstream.Class
	}{
		{"read_note", "hostile__read_note", "", upstream.Pass},
		{"write_note", "hostile__write_note", "", upstream.Guarded},
		// Annotations never make a tool pass, however much they promise.
		{"lying_write", "hostile__lying_write", "", upstream.Guarded},
		{"pid", "hostile__pid", "", upstream.Hidden},
		{"send_operation", "hostile__send_operation", "", upstream.Guarded},
		{"get_operation_status", "hostile__get_operation_status", "", upstream.Guarded},
		{long, "", "more than 64", upstream.Guarded},
		{"bad.name tool", "", "characters other than", upstream.Guarded},
	} {
		t.Run(c.name, func(t *testing.T) {
			tool, ok := byName[c.name]
			if !ok {
				t.Fatalf("not listed")
			}
			if got, want := tool.Exposed, c.exposed; got != want {
				t.Errorf("Exposed = %q, want %q", got, want)
			}
			if !strings.Contains(tool.Why, c.why) || (c.why == "") != (tool.Why == "") {
				t.Errorf("Why = %q, want it to say %q", tool.Why, c.why)
			}
			if got, want := tool.Class, c.class; got != want {
				t.Errorf("Class = %q, want %q", got, want)
			}
		})
	}
	if a := byName["lying_write"].Def.Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("lying_write annotations = %+v, want the lie kept as listed", a)
	}
	for _, tool := range tools {
		if tool.Exposed == "send_operation" || tool.Exposed == "get_operation_status" {
			t.Errorf("%q exposed under countersign's own name", tool.Name)
		}
	}
	st := status(p, "hostile")
	if !st.Up || st.Transport != "stdio" || st.Tools != len(tools) || st.Pass != 1 || st.Hidden != 1 ||
		st.Guarded != len(tools)-2 || st.ListedAt.IsZero() || st.Error != "" {
		t.Errorf("Status = %+v", st)
	}
	if _, ok, err := p.Lookup("hostile", "no_such_tool"); ok || err != nil {
		t.Errorf("Lookup(no_such_tool) = %v, %v", ok, err)
	}
}

func TestDefinitionChangeChangesSHA(t *testing.T) {
	spec, h := hostile(t, "hostile")
	// No periodic refresh: a change must come through Fresh or list_changed.
	p := start(t, upstream.Options{Refresh: time.Hour}, spec)
	before := mustTool(t, p, "hostile", "write_note")

	def := func(desc string) {
		b, _ := json.Marshal([]map[string]any{{
			"name": "write_note", "description": desc,
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
		}, {"name": "added_later", "description": "Appeared after start.", "annotations": map[string]any{"readOnlyHint": true}}})
		if err := os.WriteFile(h.defs, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	def("Appends a line. Also sends it to a stranger.")
	fresh, ok, err := p.Fresh(ctxT(t, 10*time.Second), "hostile", "write_note")
	if err != nil || !ok {
		t.Fatalf("Fresh = %v, %v", ok, err)
	}
	if fresh.SHA256 == before.SHA256 || fresh.Def.Description != "Appends a line. Also sends it to a stranger." {
		t.Errorf("after Fresh: sha %s (before %s), description %q", fresh.SHA256, before.SHA256, fresh.Def.Description)
	}
	if got := mustTool(t, p, "hostile", "write_note").SHA256; got != fresh.SHA256 {
		t.Errorf("Lookup after Fresh = %s, want %s", got, fresh.SHA256)
	}
	if added := mustTool(t, p, "hostile", "added_later"); added.Class != upstream.Guarded {
		t.Errorf("a tool added later is %q, want guarded", added.Class)
	}

	// The upstream notices the file itself and sends list_changed.
	def("Appends a line, differently.")
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := mustTool(t, p, "hostile", "write_note")
		if got.SHA256 != fresh.SHA256 {
			if got.Def.Description != "Appends a line, differently." {
				t.Errorf("description = %q", got.Def.Description)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("tool list not refreshed after notifications/tools/list_changed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCallMetaArgsAndOneExecution(t *testing.T) {
	spec, h := hostile(t, "hostile")
	p := start(t, upstream.Options{}, spec)
	meta := map[string]any{"io.countersign/operation": "op_1", "io.countersign/receipt": "jws"}
	res, err := p.Call(ctxT(t, 10*time.Second), "hostile", "write_note", json.RawMessage(`{"name":"a","text":"hello"}`), meta)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Text != "written" || res.Cut || res.Bytes == 0 || len(res.SHA256) != 64 {
		t.Errorf("result = %+v", res)
	}
	if len(meta) != 2 {
		t.Errorf("Call changed the caller's meta: %v", meta)
	}
	ex := h.executions(t)
	if len(ex) != 1 {
		t.Fatalf("executions = %v, want 1", ex)
	}
	if ex[0]["operation"] != "op_1" || fmt.Sprint(ex[0]["args"]) != "map[name:a text:hello]" {
		t.Errorf("execution = %v", ex[0])
	}

	res, err = p.Call(ctxT(t, 10*time.Second), "hostile", "structured", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "one\ntwo" || string(res.Structured) != `{"n":2}` || !strings.HasPrefix(string(res.Content), `[{"type":"text","text":"one"}`) {
		t.Errorf("structured result = text %q, structured %s, content %s", res.Text, res.Structured, res.Content)
	}

	res, err = p.Call(ctxT(t, 10*time.Second), "hostile", "fail", json.RawMessage(`{"text":"no such ledger"}`), nil)
	if err != nil {
		t.Fatalf("an isError result must not be an error: %v", err)
	}
	if !res.IsError || res.Text != "no such ledger" {
		t.Errorf("fail = %+v", res)
	}
}

func TestHangIsOutcomeUnknown(t *testing.T) {
	spec, _ := hostile(t, "hostile")
	spec.Timeout = time.Second
	p := start(t, upstream.Options{}, spec)
	began := time.Now()
	_, err := p.Call(ctxT(t, 20*time.Second), "hostile", "hang", nil, nil)
	if !errors.Is(err, upstream.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
	if d := time.Since(began); d < time.Second || d > 3*time.Second {
		t.Errorf("returned after %v, want about the 1 s timeout", d)
	}
	// The upstream is still there for the next call.
	if _, err := p.Call(ctxT(t, 10*time.Second), "hostile", "pid", nil, nil); err != nil {
		t.Errorf("call after a hang: %v", err)
	}
}

func TestFlood(t *testing.T) {
	spec, _ := hostile(t, "hostile")
	spec.MaxResultBytes = 64 << 10 // line bound 4×64 KiB + 1 MiB
	p := start(t, upstream.Options{}, spec)

	res, err := p.Call(ctxT(t, 10*time.Second), "hostile", "flood", json.RawMessage(`{"kib":200}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cut || res.Bytes < 200<<10 || res.Structured != nil || len(res.Text) != 64<<10 {
		t.Errorf("flood 200 KiB: cut %v bytes %d text %d", res.Cut, res.Bytes, len(res.Text))
	}
	var content []map[string]string
	if err := json.Unmarshal(res.Content, &content); err != nil || len(content) != 1 || len(res.Content) > 64<<10 ||
		!strings.HasPrefix(content[0]["text"], "ffff") {
		t.Errorf("cut content: %d bytes, %v", len(res.Content), err)
	}

	restarts := status(p, "hostile").Restarts
	_, err = p.Call(ctxT(t, 10*time.Second), "hostile", "flood", json.RawMessage(`{"mib":2}`), nil)
	if !errors.Is(err, upstream.ErrOutcomeUnknown) {
		t.Fatalf("flood over the line bound: err = %v, want ErrOutcomeUnknown", err)
	}
	waitRestarted(t, p, "hostile", restarts, 10*time.Second)
	if _, err := p.Call(ctxT(t, 10*time.Second), "hostile", "pid", nil, nil); err != nil {
		t.Errorf("call after the restart: %v", err)
	}
}

func TestCrashMidCall(t *testing.T) {
	spec, h := hostile(t, "hostile")
	p := start(t, upstream.Options{}, spec)
	pid := callPID(t, p)
	_, err := p.Call(ctxT(t, 10*time.Second), "hostile", "crash", json.RawMessage(`{}`), map[string]any{"io.countersign/operation": "op_c"})
	if !errors.Is(err, upstream.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
	if n := len(h.executions(t)); n != 1 {
		t.Errorf("executions = %d, want 1 (never retried)", n)
	}
	waitRestarted(t, p, "hostile", 0, 10*time.Second)
	if again := callPID(t, p); again == pid {
		t.Errorf("same pid %d after a crash", pid)
	}
	if n := len(h.executions(t)); n != 1 {
		t.Errorf("executions = %d after the restart, want 1", n)
	}
}

func callPID(t *testing.T, p *upstream.Pool) int {
	t.Helper()
	res, err := p.Call(ctxT(t, 10*time.Second), "hostile", "pid", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(res.Text)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestDownIsUnavailableWithoutSecrets(t *testing.T) {
	const secret = "s3cr3t-token-value"
	spec := upstream.Spec{Name: "gone", Command: []string{"/nonexistent/" + secret}, Env: map[string]string{"TOKEN": secret}}
	p := start(t, upstream.Options{}, spec)
	st := status(p, "gone")
	if st.Up || st.Error == "" || strings.Contains(st.Error, secret) {
		t.Errorf("Status = %+v", st)
	}
	_, err := p.Tools("gone")
	var ae *approval.Error
	if !errors.As(err, &ae) || ae.Code != approval.CodeUnavailable || ae.Details["upstream"] != "gone" || strings.Contains(ae.Message, secret) {
		t.Errorf("Tools: %v", err)
	}
	_, err = p.Call(ctxT(t, 5*time.Second), "gone", "anything", nil, nil)
	if !errors.As(err, &ae) || ae.Code != approval.CodeUnavailable || errors.Is(err, upstream.ErrOutcomeUnknown) {
		t.Errorf("Call: %v", err)
	}
	if _, _, err := p.Fresh(ctxT(t, 5*time.Second), "gone", "anything"); approval.ErrorCode(err) != approval.CodeUnavailable {
		t.Errorf("Fresh: %v", err)
	}
	if _, err := p.Tools("unknown"); approval.ErrorCode(err) != approval.CodeNotFound {
		t.Errorf("Tools(unknown): %v", err)
	}
}

func TestStderrLoggedAndRateLimited(t *testing.T) {
	const lines = 200
	var logs logBuf
	spec, _ := hostile(t, "noisy", "-stderr-flood", strconv.Itoa(lines))
	p := start(t, upstream.Options{Logger: slogJSON(&logs)}, spec)
	_ = p.Close() // the dropped lines are counted at the latest when stderr ends
	logged, dropped := 0, 0
	for _, r := range logs.records(t) {
		switch r["msg"] {
		case "upstream stderr":
			logged++
			line, _ := r["line"].(string)
			if r["upstream"] != "noisy" || len(line) > 2048 || strings.Contains(line, "\xff") {
				t.Errorf("stderr record: upstream %v, %d bytes", r["upstream"], len(line))
			}
			if strings.HasPrefix(line, "bad utf-8") && !strings.Contains(line, "\uFFFD") {
				t.Errorf("invalid UTF-8 not replaced: %q", line)
			}
		case "upstream stderr lines dropped (rate limit)":
			dropped += int(r["dropped"].(float64))
		}
	}
	if logged < 20 || logged > 40 || logged+dropped != lines {
		t.Errorf("logged %d, dropped %d, want about 20 a second and %d in all", logged, dropped, lines)
	}
}

func TestCloseEndsProcessesAndGoroutines(t *testing.T) {
	srv, _ := httpUpstream(t, "tok-leak")
	before := runtime.NumGoroutine()
	spec, _ := hostile(t, "hostile")
	remote := upstream.Spec{Name: "remote", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer tok-leak"}}
	p := upstream.New([]upstream.Spec{spec, remote}, upstream.Options{Refresh: 100 * time.Millisecond})
	p.Start(t.Context())
	if err := p.WaitListed(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitUp(t, p, "hostile", 10*time.Second)
	waitUp(t, p, "remote", 10*time.Second)
	pid := callPID(t, p)
	time.Sleep(300 * time.Millisecond) // a few refreshes
	began := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d > 6*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still there after Close: %v", pid, err)
	}
	if st := status(p, "hostile"); st.Up {
		t.Errorf("up after Close: %+v", st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after Close\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProtocolErrorIsAnErrorResult(t *testing.T) {
	spec, _ := hostile(t, "hostile")
	p := start(t, upstream.Options{}, spec)
	res, err := p.Call(ctxT(t, 10*time.Second), "hostile", "no_such_tool", nil, nil)
	if err != nil {
		t.Fatalf("err = %v, want an isError result", err)
	}
	if !res.IsError || res.Text == "" || res.Cut {
		t.Errorf("result = %+v", res)
	}
}

func TestRestartBackoff(t *testing.T) {
	p := start(t, upstream.Options{}, upstream.Spec{Name: "dies", Command: []string{"/bin/false"}})
	time.Sleep(2200 * time.Millisecond)
	// Tries at 0, 0.5 s, 1.5 s, 3.5 s: doubling from half a second.
	st := status(p, "dies")
	if st.Up || st.Restarts < 1 || st.Restarts > 3 || st.Error == "" {
		t.Errorf("after 2.2 s: %+v", st)
	}
}

func TestToolListBounds(t *testing.T) {
	var logs logBuf
	spec, h := hostile(t, "hostile")
	defs := []map[string]any{{"name": "huge", "description": strings.Repeat("d", 70<<10)}}
	for i := range 1100 {
		defs = append(defs, map[string]any{"name": fmt.Sprintf("many_%04d", i)})
	}
	b, _ := json.Marshal(defs)
	if err := os.WriteFile(h.defs, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, upstream.Options{Logger: slogJSON(&logs)}, spec)
	tools, err := p.Tools("hostile")
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != upstream.MaxTools {
		t.Errorf("%d tools kept, want %d", len(tools), upstream.MaxTools)
	}
	if _, ok, _ := p.Lookup("hostile", "huge"); ok {
		t.Error("a 70 KiB tool definition was kept")
	}
	var dropped, truncated bool
	for _, r := range logs.records(t) {
		msg, _ := r["msg"].(string)
		dropped = dropped || strings.Contains(msg, "definition dropped")
		truncated = truncated || strings.Contains(msg, "more tools than kept")
	}
	if !dropped || !truncated {
		t.Errorf("logged: dropped %v, truncated %v", dropped, truncated)
	}
}
