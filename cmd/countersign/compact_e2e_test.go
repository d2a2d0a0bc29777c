package main

// Compact results (SPEC §13): a status read costs the model a few hundred
// bytes whatever was prepared, over REST and MCP; ?full=1 returns the
// whole input.
//
// Measurements (the table in BENCHMARKS.md): COUNTERSIGN_COMPACT_MEASURE=1
// go test -run TestCompactMeasure -v ./cmd/countersign

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// compactCase is one prepared input of the measurement.
type compactCase struct {
	name string
	body map[string]any // POST /v1/operations
}

func compactCases() []compactCase {
	email := func(text string, extra map[string]any) map[string]any {
		in := map[string]any{"to": []string{"client@client.example"}, "subject": "Your invoice", "text": text}
		for k, v := range extra {
			in[k] = v
		}
		return map[string]any{"action": "email.send", "input": in}
	}
	line := "The quarterly figures are attached; please review them before Friday.\n" // 72 bytes
	pdf := make([]byte, 300<<10)
	for i := range pdf {
		pdf[i] = byte(i * 7)
	}
	items := make([]map[string]any, 100)
	for i := range items {
		items[i] = map[string]any{"method": "PATCH", "path": fmt.Sprintf("/events/%d", 100+i),
			"body": map[string]any{"title": fmt.Sprintf("Retro %d: %s", i, strings.Repeat("agenda ", 20))}}
	}
	return []compactCase{
		{"email, 1 KiB text", email(strings.Repeat(line, 14), nil)},
		{"email, 100 KiB text", email(strings.Repeat(line, 1422), nil)},
		{"email, 300 KiB attachment", email("Attached.\n", map[string]any{"attachments": []map[string]string{
			{"name": "figures.pdf", "content_type": "application/pdf", "content_base64": base64.StdEncoding.EncodeToString(pdf)}}})},
		{"bulk, 100 HTTP items", map[string]any{"action": "http.request", "input": map[string]any{"target": "calendar", "items": items}}},
	}
}

// compactService runs a policy with email and the calendar target, and
// takes requests up to 1 MiB (the 300 KiB attachment is 400 KiB in base64).
func compactService(t *testing.T) *testService {
	target := &mcpTarget{doc: map[string]any{"title": "Standup", "start": "09:00"}}
	ts := httptest.NewServer(target)
	t.Cleanup(ts.Close)
	smtp := smtptest.Start(t, smtptest.Options{})
	cfg := strings.Replace(mcpConfig(ts.URL), `scopes: ["http.request:calendar"]`, `scopes: [email.send, "http.request:calendar"]`, 1)
	srv := startService(t, serviceOpts{Config: cfg + "settings: {max_request_bytes: 1MiB}\n",
		Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	requireAction(t, srv, "http.request")
	requireAction(t, srv, "email.send")
	return srv
}

// statusSizes prepares c and returns the bytes of the status read over
// REST, over REST with ?full=1, and over MCP (the tool result as the host
// receives it), with the REST body.
func statusSizes(t *testing.T, srv *testService, cs *mcp.ClientSession, c compactCase) (rest, full, viaMCP int, body []byte) {
	t.Helper()
	req, _ := json.Marshal(c.body)
	st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, string(req))
	if st != 201 {
		t.Fatalf("%s: prepare: %d %.300s", c.name, st, b)
	}
	key := decode[op](t, b).Key
	_, body = srv.call(t, "GET", "/v1/operations/"+key, srv.APIKey, "")
	_, fb := srv.call(t, "GET", "/v1/operations/"+key+"?full=1", srv.APIKey, "")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolGetOperationStatus,
		Arguments: map[string]any{"operation_key": key}})
	must(t, err)
	if res.IsError {
		t.Fatalf("%s: get_operation_status failed", c.name)
	}
	mb, _ := json.Marshal(res)
	return len(body), len(fb), len(mb), body
}

func TestCompactMeasure(t *testing.T) {
	if os.Getenv("COUNTERSIGN_COMPACT_MEASURE") == "" {
		t.Skip("set COUNTERSIGN_COMPACT_MEASURE=1 to measure")
	}
	srv := compactService(t)
	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	t.Logf("MEASURE | input | prepared bytes | REST status | REST ?full=1 | MCP get_operation_status |")
	for _, c := range compactCases() {
		req, _ := json.Marshal(c.body)
		rest, full, viaMCP, _ := statusSizes(t, srv, cs, c)
		t.Logf("MEASURE | %s | %d | %d | %d | %d |", c.name, len(req), rest, full, viaMCP)
	}
}

// TestCompactStatus: over REST and MCP a status read stays small whatever
// was prepared, and ?full=1 returns the input whole.
func TestCompactStatus(t *testing.T) {
	srv := compactService(t)
	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	for _, c := range compactCases() {
		req, _ := json.Marshal(c.body)
		rest, full, viaMCP, body := statusSizes(t, srv, cs, c)
		// The view beyond the input (approval, next step, hashes) is about
		// 1 KiB; the input and preview add at most 4 KiB.
		if rest > 6<<10 || viaMCP > 14<<10 {
			t.Errorf("%s: status read is %d bytes over REST, %d over MCP", c.name, rest, viaMCP)
		}
		if len(req) > 8<<10 && full < len(req)/2 {
			t.Errorf("%s: ?full=1 is %d bytes for an input of %d", c.name, full, len(req))
		}
		if strings.Contains(string(body), "/a/") {
			t.Errorf("%s: a link in the status: %s", c.name, body)
		}
	}
	// get_operation_status with full returns the whole input over /mcp.
	req, _ := json.Marshal(compactCases()[1].body)
	_, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, string(req))
	o := mcpOK(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": decode[op](t, b).Key, "full": true})
	if len(o.op.Input) < 90<<10 {
		t.Errorf("get_operation_status full: input of %d bytes", len(o.op.Input))
	}
	st, _ := srv.call(t, "GET", "/v1/operations/op_aaaaaaaaaaaaaaaaaaaaaaaaaa?full=maybe", srv.APIKey, "")
	if st != 400 {
		t.Errorf("full=maybe: %d, want 400", st)
	}
}

// TestMCPStdioBridgeServesWhatTheServiceServes: countersign mcp lists the
// tools the service lists on /mcp and GET /v1/tools (here email only: no
// Slack, no HTTP target, so neither their prepare tools nor prepare_undo),
// its instructions name them, and its status reads are compact unless
// full is asked.
func TestMCPStdioBridgeServesWhatTheServiceServes(t *testing.T) {
	bin := buildBinary(t)
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "email") + "settings: {max_request_bytes: 1MiB}\n",
		Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	names := func(ts []*mcp.Tool) []string {
		var out []string
		for _, tool := range ts {
			out = append(out, tool.Name)
		}
		slices.Sort(out)
		return out
	}
	lt, err := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{}).ListTools(context.Background(), nil)
	must(t, err)
	want := names(lt.Tools)
	if slices.Contains(want, mcpserver.ToolPrepareHTTPRequest) || !slices.Contains(want, mcpserver.ToolPrepareEmail) {
		t.Fatalf("/mcp lists %v for an email-only policy", want)
	}
	st, b := srv.call(t, "GET", "/v1/tools", srv.APIKey, "")
	var rest struct{ Tools []*mcp.Tool }
	must(t, json.Unmarshal(b, &rest))
	if st != 200 || !slices.Equal(names(rest.Tools), want) {
		t.Fatalf("GET /v1/tools: %d %v; /mcp lists %v", st, names(rest.Tools), want)
	}
	if st, _ := srv.call(t, "GET", "/v1/tools", "", ""); st != 401 {
		t.Errorf("GET /v1/tools without a key: %d", st)
	}

	bridgeLog := &syncBuffer{}
	cs := mcpStdio(t, bin, srv.URL(), srv.APIKey, &syncBuffer{}, bridgeLog)
	lt, err = cs.ListTools(context.Background(), nil)
	must(t, err)
	if got := names(lt.Tools); !slices.Equal(got, want) {
		t.Errorf("countersign mcp lists %v; the service serves %v", got, want)
	}
	ins := cs.InitializeResult().Instructions
	for _, tool := range mcpserver.ToolNames {
		if strings.Contains(ins, tool) != slices.Contains(want, tool) {
			t.Errorf("instructions name %s: %v; served: %v\n%s", tool, strings.Contains(ins, tool), slices.Contains(want, tool), ins)
		}
	}

	// A 300 KiB attachment: compact through the bridge, whole with full.
	c := compactCases()[2]
	req, _ := json.Marshal(c.body)
	st, b = srv.call(t, "POST", "/v1/operations", srv.APIKey, string(req))
	if st != 201 {
		t.Fatalf("prepare: %d %.300s", st, b)
	}
	key := decode[op](t, b).Key
	for _, full := range []bool{false, true} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolGetOperationStatus,
			Arguments: map[string]any{"operation_key": key, "full": full}})
		must(t, err)
		data, _ := json.Marshal(res)
		if full != (len(data) > 400<<10) || (!full && len(data) > 14<<10) {
			t.Errorf("get_operation_status full=%v over stdio: %d bytes", full, len(data))
		}
	}
}
