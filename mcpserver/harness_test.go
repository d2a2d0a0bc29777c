package mcpserver_test

// Test harness: a real approval.Service on a real store (REDIS_URL, or an
// embedded miniredis), with fake email.send and slack.post_message actions
// (the real ones live in their own packages and are exercised end to end in
// cmd/countersign), a notifier that keeps each approval link the way a
// person's inbox would, and MCP clients over each transport:
//
//	h := newHarness(t)
//	cs := h.connect(t, viaInMemory)        // or viaHTTP, viaREST
//	res := call(t, cs, "prepare_email", map[string]any{…})
//	h.approve(t, key)                      // the human, through the link
//
// Every byte an MCP response carries is kept in h.wire, and h.secrets()
// lists the link tokens and their parts that must never appear in it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/testkit"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/testing/openapitest"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/mcpserver"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	agentKey  = "cs_mcp_test_agent_key"
	narrowKey = "cs_mcp_test_narrow_key"
)

// fakeEmail stands in for email.send: it requires to, subject and text,
// and normalizes addresses to lower case.
type fakeEmail struct{ runs atomic.Int32 }

func (*fakeEmail) Name() string { return "email.send" }

func (*fakeEmail) Prepare(_ context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	var in struct {
		To      []string `json:"to"`
		Cc      []string `json:"cc"`
		Bcc     []string `json:"bcc"`
		Subject string   `json:"subject"`
		Text    string   `json:"text"`
		HTML    string   `json:"html,omitempty"`
		ReplyTo string   `json:"reply_to,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(req.Input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, approval.FieldErrors{{Field: "input", Reason: err.Error()}}.Err()
	}
	var fe approval.FieldErrors
	if len(in.To) == 0 {
		fe.Add("to", "at least one recipient is required")
	}
	for i, a := range in.To {
		if !strings.Contains(a, "@") {
			fe.Add("to["+itoa(i)+"]", "not an email address")
		}
		in.To[i] = strings.ToLower(a)
	}
	if in.Subject == "" {
		fe.Add("subject", "required")
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return &approval.Prepared{Input: in, Preview: approval.Preview{
		Title: "Email to " + strings.Join(in.To, ", "), Summary: in.Subject,
		Fields:   []approval.Field{{Name: "subject", Label: "Subject", Value: in.Subject}, {Name: "text", Label: "Text", Value: in.Text, Long: true}},
		Warnings: []string{"irreversible"},
	}}, nil
}

func (e *fakeEmail) Execute(context.Context, *approval.Operation) (json.RawMessage, error) {
	e.runs.Add(1)
	return json.RawMessage(`{"message_id":"<fake@countersign.test>"}`), nil
}

// fakeSlack stands in for slack.post_message, and can be undone (by
// posting a retraction), so prepare_undo has something to draft.
type fakeSlack struct{}

func (fakeSlack) Name() string { return "slack.post_message" }

func (fakeSlack) Prepare(_ context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	var in struct {
		Channel  string `json:"channel"`
		Text     string `json:"text"`
		ThreadTS string `json:"thread_ts,omitempty"`
	}
	if err := json.Unmarshal(req.Input, &in); err != nil || in.Channel == "" || in.Text == "" {
		return nil, approval.FieldErrors{{Field: "channel", Reason: "channel and text are required"}}.Err()
	}
	return &approval.Prepared{Input: in, Preview: approval.Preview{Title: "Post to " + in.Channel, Summary: in.Text}}, nil
}

func (fakeSlack) Execute(_ context.Context, op *approval.Operation) (json.RawMessage, error) {
	return json.RawMessage(`{"ts":"1700000000.000100"}`), nil
}

func (fakeSlack) UndoInput(_ context.Context, op *approval.Operation) (string, json.RawMessage, error) {
	var in struct {
		Channel string `json:"channel"`
	}
	_ = json.Unmarshal(op.Input, &in)
	b, _ := json.Marshal(map[string]string{"channel": in.Channel, "text": "(retracted)"})
	return "slack.post_message", b, nil
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// inbox keeps every notice, as the approvers' inboxes would.
type inbox struct {
	mu      sync.Mutex
	notices []approval.Notice
}

func (b *inbox) Notify(_ context.Context, n approval.Notice) (map[string]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notices = append(b.notices, n)
	return nil, nil
}

// count is how many notices went out for key.
func (b *inbox) count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, x := range b.notices {
		if x.Message.OperationKey == key {
			n++
		}
	}
	return n
}

// link waits for the approval link of key and returns its token.
func (b *inbox) link(t testing.TB, key string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		for _, n := range b.notices {
			if n.Message.OperationKey == key && n.Link != "" {
				b.mu.Unlock()
				_, tok, _ := strings.Cut(n.Link, "/a/")
				return tok
			}
		}
		b.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no approval link for %s", key)
	return ""
}

// tokens are every link token sent so far.
func (b *inbox) tokens() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, n := range b.notices {
		if _, tok, ok := strings.Cut(n.Link, "/a/"); ok {
			out = append(out, tok)
		}
	}
	return out
}

type harness struct {
	svc    *approval.Service
	store  *store.Redis
	inbox  *inbox
	email  *fakeEmail
	agent  *approval.Principal
	narrow *approval.Principal
	logs   *syncBuffer
	log    *slog.Logger
	wire   *syncBuffer // every byte of every MCP response, on every transport
	t      testing.TB  // the test that owns the harness (and its servers)
}

// syncBuffer is a goroutine-safe log sink that tests can search.
type syncBuffer = testkit.Buffer

func keyHash(k string) string { return strings.TrimPrefix(approval.SHA256Hex([]byte(k)), "sha256:") }

func newHarness(t testing.TB) *harness {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	h := &harness{inbox: &inbox{}, email: &fakeEmail{}, logs: &syncBuffer{}, wire: &syncBuffer{}, t: t}
	h.log = slog.New(slog.NewJSONHandler(h.logs, nil))
	h.store = store.New(rdb, h.log)
	h.store.Block = 100 * time.Millisecond
	t.Cleanup(func() { _ = h.store.Close() })
	h.agent = &approval.Principal{ID: "agent", KeyHash: keyHash(agentKey), Scopes: []string{"email.send", "slack.post_message"}}
	h.narrow = &approval.Principal{ID: "narrow", KeyHash: keyHash(narrowKey), Scopes: []string{"slack.post_message"}}
	policy := &approval.Policy{
		Principals: []*approval.Principal{h.agent, h.narrow},
		Approvers:  []*approval.Approver{{ID: "grace", Name: "Grace Park", Email: "grace@example.com"}},
		Routes: []approval.RouteRule{{Name: "all", ApproverIDs: []string{"grace"}, Required: 1,
			Notify: []string{"console"}, ApprovalTTL: time.Hour}},
	}
	svc, err := approval.NewService(approval.Config{
		Store: h.store, Policy: policy, Actions: []approval.Action{h.email, fakeSlack{}},
		Notifiers: map[string]approval.Notifier{"console": h.inbox}, Links: approval.RandomKeyring(),
		PublicURL: "http://countersign.test", Logger: h.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); svc.RunWorkers(ctx, h.store, "w", 2) }()
	go func() { defer wg.Done(); svc.RunTimers(ctx, h.store, 50*time.Millisecond) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return h
}

// approve decides key as the human, through the emailed/console link.
func (h *harness) approve(t testing.TB, key string, yes bool, reason string) {
	t.Helper()
	v, res, err := h.svc.DecideByLink(context.Background(), h.inbox.link(t, key), yes, reason)
	if err != nil || v.Problem != approval.LinkOK {
		t.Fatalf("decide %s: %v %v %+v", key, err, v.Problem, res)
	}
}

type transport string

const (
	viaInMemory transport = "in-memory"
	viaHTTP     transport = "streamable-http"
	viaREST     transport = "rest-bridge"
)

var transports = []transport{viaInMemory, viaHTTP, viaREST}

// connect returns an MCP client session as principal key over tr.
func (h *harness) connect(t testing.TB, tr transport, apiKey string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	var ct mcp.Transport
	switch tr {
	case viaInMemory:
		p, err := h.svc.Authenticate(apiKey)
		if err != nil {
			t.Fatal(err)
		}
		srv := mcpserver.NewServer(&mcpserver.Local{Service: h.svc, Principal: p}, &mcpserver.Options{Logger: h.log})
		c, s := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close() })
		ct = &mcp.LoggingTransport{Transport: c, Writer: h.wire}
	case viaHTTP:
		ct = &mcp.StreamableClientTransport{Endpoint: h.httpURL(t), HTTPClient: h.httpClient(apiKey)}
	case viaREST:
		c, err := client.New(h.restURL(t), apiKey, &client.Options{HTTPClient: &http.Client{Transport: restCheck(t)}})
		if err != nil {
			t.Fatal(err)
		}
		srv := mcpserver.NewServer(c, &mcpserver.Options{Logger: h.log})
		cl, s := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close() })
		ct = &mcp.LoggingTransport{Transport: cl, Writer: h.wire}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", tr, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

var (
	httpOnce sync.Map // *harness → url
)

// httpURL serves /mcp over real HTTP for this harness.
func (h *harness) httpURL(t testing.TB) string {
	if u, ok := httpOnce.Load(h); ok {
		return u.(string)
	}
	// Every tool, as the stdio bridge lists them: the errors of a tool whose
	// action is not configured are tested too (TestToolsListWhatCanRun
	// tests the default, which leaves such tools out).
	all := []string{mcpserver.ActionEmailSend, mcpserver.ActionSlackPostMessage, mcpserver.ActionHTTPRequest}
	srv := httptest.NewServer(mcpserver.NewHTTPHandler(h.svc, &mcpserver.HTTPOptions{Options: mcpserver.Options{Logger: h.log, Actions: all}}))
	h.t.Cleanup(srv.Close)
	httpOnce.Store(h, srv.URL+"/mcp")
	return srv.URL + "/mcp"
}

// restURL serves the REST API (package web) for this harness.
func (h *harness) restURL(t testing.TB) string {
	key := struct{ *harness }{h}
	if u, ok := httpOnce.Load(key); ok {
		return u.(string)
	}
	ws, err := web.New(web.Config{Service: h.svc, PublicURL: "http://countersign.test", Logger: h.log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ws.App().Listener(ln) }()
	h.t.Cleanup(func() { _ = ws.App().Shutdown() })
	u := "http://" + ln.Addr().String()
	httpOnce.Store(key, u)
	restCheck(t).Watch(h.t, u)
	return u
}

var (
	restCheckOnce sync.Once
	restChecker   *openapitest.Transport
)

// restCheck validates every REST response the bridge gets against the
// OpenAPI description (web/openapi.json).
func restCheck(t testing.TB) *openapitest.Transport {
	restCheckOnce.Do(func() {
		tr, err := openapitest.NewTransport(nil)
		if err != nil {
			t.Fatal(err)
		}
		restChecker = tr
	})
	return restChecker
}

// httpClient sends the bearer key and copies every response body into
// h.wire.
func (h *harness) httpClient(apiKey string) *http.Client {
	return &http.Client{Transport: &tap{key: apiKey, wire: h.wire}}
}

type tap struct {
	key  string
	wire io.Writer
}

func (tp *tap) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if tp.key != "" {
		r.Header.Set("Authorization", "Bearer "+tp.key)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	for k, vs := range resp.Header {
		tp.wire.Write([]byte(k + ": " + strings.Join(vs, ",") + "\n"))
	}
	tp.wire.Write(body)
	tp.wire.Write([]byte("\n"))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, err
}

// secrets are the link tokens sent so far and each of their parts (claims,
// signature, nonce): none may appear in anything an agent can read.
func (h *harness) secrets() []string {
	var out []string
	for _, tok := range h.inbox.tokens() {
		out = append(out, secretParts(tok)...)
	}
	return out
}

var (
	secretParts     = testkit.LinkSecrets
	assertNoSecrets = testkit.AssertNoLinkSecrets
)

// toolResult is a tool call's outcome as the tests read it.
type toolResult struct {
	res  *mcp.CallToolResult
	text string
	op   approval.View
	list mcpserver.ListResult
	err  *approval.Error
}

// call calls a tool and decodes its structured content.
func call(t testing.TB, cs *mcp.ClientSession, tool string, args any) toolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	out := toolResult{res: res}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.text += tc.Text + "\n"
		}
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	checkOutputSchema(t, cs, tool, data)
	if res.IsError {
		var ec struct {
			Error *approval.Error `json:"error"`
		}
		if err := json.Unmarshal(data, &ec); err != nil || ec.Error == nil {
			t.Fatalf("%s: tool error without the contract's error object: %s / %s", tool, data, out.text)
		}
		out.err = ec.Error
		return out
	}
	if tool == mcpserver.ToolListOperations {
		must(t, json.Unmarshal(data, &out.list))
	} else {
		must(t, json.Unmarshal(data, &out.op))
	}
	return out
}

var outputSchemas sync.Map // "session|tool" → *jsonschema.Resolved

// checkOutputSchema validates structured content, of results and of tool
// errors alike, against the tool's advertised output schema, as the
// TypeScript SDK client does.
func checkOutputSchema(t testing.TB, cs *mcp.ClientSession, tool string, data []byte) {
	t.Helper()
	key := fmt.Sprintf("%p|%s", cs, tool)
	r, ok := outputSchemas.Load(key)
	if !ok {
		lt, err := cs.ListTools(context.Background(), nil)
		must(t, err)
		for _, tl := range lt.Tools {
			if tl.Name != tool {
				continue
			}
			raw, _ := json.Marshal(tl.OutputSchema)
			var s jsonschema.Schema
			must(t, json.Unmarshal(raw, &s))
			res, err := s.Resolve(nil)
			must(t, err)
			r = res
			outputSchemas.Store(key, res)
		}
		if r == nil {
			t.Fatalf("no tool %s", tool)
		}
	}
	var v any
	must(t, json.Unmarshal(data, &v))
	if err := r.(*jsonschema.Resolved).Validate(v); err != nil {
		t.Errorf("%s: structured content does not match the output schema: %v\n%s", tool, err, data)
	}
}

// ok calls a tool that must succeed.
func ok(t testing.TB, cs *mcp.ClientSession, tool string, args any) toolResult {
	t.Helper()
	r := call(t, cs, tool, args)
	if r.err != nil {
		t.Fatalf("%s(%v): %s: %s", tool, args, r.err.Code, r.err.Message)
	}
	return r
}

// fails calls a tool that must fail with code.
func fails(t testing.TB, cs *mcp.ClientSession, tool string, args any, code approval.Code) toolResult {
	t.Helper()
	r := call(t, cs, tool, args)
	if r.err == nil {
		t.Fatalf("%s(%v) succeeded, want %s: %s", tool, args, code, r.text)
	}
	if r.err.Code != code {
		t.Fatalf("%s(%v) = %s (%s), want %s", tool, args, r.err.Code, r.err.Message, code)
	}
	if !strings.Contains(r.text, string(code)) || !strings.Contains(r.text, r.err.Message) {
		t.Errorf("%s: the error text does not carry the code and message: %q", tool, r.text)
	}
	return r
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var errTimeout = errors.New("timeout")

// waitStatus follows key with get_operation_status until it reaches want.
func waitStatus(t testing.TB, cs *mcp.ClientSession, key string, want approval.Status) approval.View {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := ok(t, cs, mcpserver.ToolGetOperationStatus, map[string]any{"operation_key": key, "wait_seconds": 5})
		if r.op.Status == want {
			return r.op
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, want %s: %v", key, r.op.Status, want, errTimeout)
		}
	}
}

func emailArgs(extra map[string]any) map[string]any {
	a := map[string]any{"to": []string{"Client@Example.com"}, "subject": "Your invoice", "text": "Hello,\nplease find it attached."}
	for k, v := range extra {
		if v == nil {
			delete(a, k)
		} else {
			a[k] = v
		}
	}
	return a
}
