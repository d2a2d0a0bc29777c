package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testing/otlptest"
	"github.com/countersign/countersign/mcpserver"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// spans records every span of a service in memory (the SDK's own
// exporter), synchronously, so a test reads them as soon as they end.
func spans(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// spanTree indexes recorded spans by id for parent lookups.
type spanTree map[trace.SpanID]tracetest.SpanStub

func treeOf(exp *tracetest.InMemoryExporter) spanTree {
	t := spanTree{}
	for _, s := range exp.GetSpans() {
		t[s.SpanContext.SpanID()] = s
	}
	return t
}

// find returns the spans named name.
func (t spanTree) find(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range t {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// under reports whether s descends from the span with id root.
func (t spanTree) under(s tracetest.SpanStub, root trace.SpanID) bool {
	for i := 0; i < 50; i++ {
		p := s.Parent.SpanID()
		if !p.IsValid() {
			return false
		}
		if p == root {
			return true
		}
		var ok bool
		if s, ok = t[p]; !ok {
			return false
		}
	}
	return false
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

// TestTracesFollowAnOperation follows one operation through the traces of
// the whole service: REST (continuing the caller's trace) → service →
// store, and worker task → store → channel and action; the same through
// MCP. No span name or attribute holds a link's secret or an API key.
func TestTracesFollowAnOperation(t *testing.T) {
	tp, exp := spans(t)
	srv := startService(t, serviceOpts{Tracer: tp})

	// The caller's trace is continued.
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	req, _ := http.NewRequest("POST", srv.URL()+"/v1/operations", strings.NewReader(
		`{"action":"email.send","input":{"to":["ada@client.example"],"subject":"Traced","text":"Hi\n"}}`))
	req.Header.Set("Authorization", "Bearer "+srv.APIKey)
	req.Header.Set("traceparent", parent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("prepare: %v %v", resp, err)
	}
	var o op
	must(t, json.NewDecoder(resp.Body).Decode(&o))
	resp.Body.Close()
	if st, b := srv.call(t, "POST", "/v1/operations/"+o.Key+"/send", srv.APIKey, ""); st != 202 {
		t.Fatalf("send: %d %s", st, b)
	}
	link := srv.consoleLink(t, o.Key, "you")
	if st, page := newBrowser().decide(t, link, "approve", ""); st != 200 {
		t.Fatalf("approve: %d %s", st, page)
	}
	srv.waitFor(t, o.Key, "succeeded")

	tree := treeOf(exp)
	prep := tree.find("POST /v1/operations")
	if len(prep) != 1 {
		t.Fatalf("%d spans POST /v1/operations; want 1", len(prep))
	}
	if got := prep[0].SpanContext.TraceID().String(); got != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("prepare's trace %s does not continue the caller's", got)
	}
	if attr(prep[0], "countersign.principal") != "dev-agent" || attr(prep[0], "http.response.status_code") != "201" {
		t.Errorf("prepare span attributes: %v", prep[0].Attributes)
	}
	for _, name := range []string{"store.Create", "prepare email.send"} {
		if ss := tree.find(name); len(ss) == 0 || !tree.under(ss[0], prep[0].SpanContext.SpanID()) {
			t.Errorf("%s is not in the prepare request's trace", name)
		}
	}
	if ss := tree.find("store.Send"); len(ss) == 0 || !tree.under(ss[0], tree.find("POST /v1/operations/:key/send")[0].SpanContext.SpanID()) {
		t.Error("store.Send is not under the send request's span")
	}
	// The page's decision, with the link's path never in a span.
	posts := tree.find("POST /a/:token")
	if len(posts) == 0 {
		t.Fatal("no span for the page's decision")
	}
	if ss := tree.find("store.Decide"); len(ss) == 0 || !tree.under(ss[0], posts[0].SpanContext.SpanID()) {
		t.Error("store.Decide is not under the page's POST")
	}
	// Workers: each task is a root span; delivery and execution under one.
	var notified, executed bool
	for _, task := range tree.find("countersign.task") {
		if attr(task, "countersign.operation") != o.Key {
			continue
		}
		for _, s := range tree {
			if !tree.under(s, task.SpanContext.SpanID()) {
				continue
			}
			switch s.Name {
			case "notify console":
				notified = true
			case "execute email.send":
				executed = attr(s, "countersign.outcome") == "succeeded"
			}
		}
	}
	if !notified || !executed {
		t.Errorf("worker traces: notified %v, executed %v", notified, executed)
	}
	if len(tree.find("redis evalsha"))+len(tree.find("redis eval")) == 0 {
		t.Error("no Redis command spans under the store calls")
	}

	// MCP: the tool call is a span under the HTTP request, the store under it.
	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	mo := mcpOK(t, cs, mcpserver.ToolPrepareEmail, emailTo("ada@client.example", nil))
	tree = treeOf(exp)
	var tool tracetest.SpanStub
	for _, s := range tree.find("tools/call prepare_email") {
		if attr(s, "countersign.operation") == mo.op.OperationKey {
			tool = s
		}
	}
	if !tool.SpanContext.IsValid() {
		t.Fatal("no span for the MCP tool call")
	}
	if p, ok := tree[tool.Parent.SpanID()]; !ok || p.Name != "POST /mcp" || attr(p, "countersign.principal") != "dev-agent" {
		t.Errorf("tool call's parent = %q %v; want the POST /mcp request of dev-agent", p.Name, p.Attributes)
	}
	var stored bool
	for _, s := range tree.find("store.Create") {
		stored = stored || (tree.under(s, tool.SpanContext.SpanID()) && attr(s, "countersign.operation") == mo.op.OperationKey)
	}
	if !stored {
		t.Error("store.Create is not under the MCP tool call")
	}

	// Nothing secret in any span.
	var all strings.Builder
	for _, s := range tree {
		fmt.Fprintf(&all, "%s %v %v %v\n", s.Name, s.Attributes, s.Events, s.Status)
	}
	assertNoCapabilities(t, []string{link}, map[string]string{"spans": all.String()})
	if strings.Contains(all.String(), srv.APIKey) {
		t.Error("a span holds the API key")
	}
}

// TestAccessLog: one line per request, refusals included, with the
// principal and client address, and a link's path never written.
func TestAccessLog(t *testing.T) {
	srv := startService(t, serviceOpts{})
	o := srv.prepareSend(t, `{"action":"email.send","input":{"to":["ada@client.example"],"subject":"Logged","text":"Hi\n"}}`)
	link := srv.consoleLink(t, o.Key, "you")
	b := newBrowser()
	if st, _, _ := b.do(t, "GET", link, nil); st != 200 {
		t.Fatalf("open link: %d", st)
	}
	bad := link[:len(link)-4] + "AAAA"
	if st, _, _ := b.do(t, "GET", bad, nil); st != 404 {
		t.Fatalf("tampered link: %d", st)
	}
	if st, _ := srv.call(t, "GET", "/v1/operations", "wrong-key", ""); st != 401 {
		t.Fatalf("wrong key: %d", st)
	}
	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	mcpOK(t, cs, mcpserver.ToolListOperations, map[string]any{})

	type line struct {
		Msg       string  `json:"msg"`
		Method    string  `json:"method"`
		Path      string  `json:"path"`
		Status    int     `json:"status"`
		Duration  float64 `json:"duration_ms"`
		Principal string  `json:"principal"`
		Client    string  `json:"client"`
	}
	var lines []line
	sc := bufio.NewScanner(strings.NewReader(srv.Stderr.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l line
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "http request" {
			lines = append(lines, l)
		}
	}
	has := func(method, path string, status int, principal string) {
		t.Helper()
		for _, l := range lines {
			if l.Method == method && l.Path == path && l.Status == status && l.Principal == principal {
				if l.Client != "127.0.0.1" || l.Duration <= 0 {
					t.Errorf("line %+v: want client 127.0.0.1 and a duration", l)
				}
				return
			}
		}
		t.Errorf("no access-log line %s %s %d principal %q in %+v", method, path, status, principal, lines)
	}
	has("POST", "/v1/operations", 201, "dev-agent")
	has("POST", "/v1/operations/"+o.Key+"/send", 202, "dev-agent")
	has("GET", "/a/…redacted", 200, "")
	has("GET", "/a/…redacted", 404, "")
	has("GET", "/v1/operations", 401, "")
	has("POST", "/mcp", 200, "dev-agent")

	// The console's own notice is the one place a link may be printed.
	var logs strings.Builder
	for _, l := range strings.Split(srv.Stderr.String(), "\n") {
		if strings.Contains(l, `"http request"`) {
			logs.WriteString(l + "\n")
		}
	}
	assertNoCapabilities(t, []string{link, bad}, map[string]string{"log access": logs.String()})
}

// TestMetricsExposition: the metrics of a whole loop, by Prometheus
// conventions, checked by promtool when it is installed.
func TestMetricsExposition(t *testing.T) {
	srv := startService(t, serviceOpts{})
	o := srv.prepareSend(t, `{"action":"email.send","input":{"to":["ada@client.example"],"subject":"Counted","text":"Hi\n"}}`)
	link := srv.consoleLink(t, o.Key, "you")
	if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	srv.waitFor(t, o.Key, "succeeded")
	pending := srv.prepareSend(t, `{"action":"email.send","input":{"to":["ada@client.example"],"subject":"Waiting","text":"Hi\n"}}`)
	srv.consoleLink(t, pending.Key, "you")

	st, body := srv.call(t, "GET", "/metrics", "", "")
	if st != 200 {
		t.Fatalf("/metrics: %d", st)
	}
	text := string(body)
	for _, want := range []string{
		`countersign_operations_total{action="email.send",status="draft"} 2`,
		`countersign_operations_total{action="email.send",status="succeeded"} 1`,
		`countersign_operations_open{status="pending_approval"} 1`,
		`countersign_operations_open{status="approved"} 0`,
		`countersign_decisions_total{channel="console",outcome="approve"} 1`,
		`countersign_decision_latency_seconds_count{outcome="approve"} 1`,
		`countersign_notifications_total{channel="console",outcome="delivered"} 2`,
		`countersign_executions_total{action="email.send",outcome="succeeded"} 1`,
		`countersign_execution_duration_seconds_count{action="email.send",outcome="succeeded"} 1`,
		`countersign_approvals_expiring_soon 0`,
		`countersign_queue_depth `,
		`countersign_stuck_executions 0`,
		`countersign_store_decode_errors_total 0`,
		`countersign_queue_oldest_task_age_seconds `,
		`countersign_store_stats_up 1`,
		`countersign_http_request_duration_seconds_count{code="201",method="POST",route="/v1/operations"} 2`,
		`countersign_build_info{goversion="go`,
		`countersign_events_total{event="sent",status="pending_approval"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	promtool(t, "check", "metrics", body)
	checkMonitoringDocs(t, text)
}

var metricNameRE = regexp.MustCompile(`countersign_[a-z_]+`)

// checkMonitoringDocs: every metric the Grafana dashboard and the alert
// rules query is one /metrics serves, and every dashboard query is valid
// PromQL (promtool parses them as recording rules).
func checkMonitoringDocs(t *testing.T, exposition string) {
	t.Helper()
	served := map[string]bool{}
	for _, l := range strings.Split(exposition, "\n") {
		if m := metricNameRE.FindString(l); m != "" && !strings.HasPrefix(l, "#") {
			served[m] = true
		}
	}
	raw, err := os.ReadFile("../../docs/monitoring/countersign-dashboard.json")
	must(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	must(t, json.Unmarshal(raw, &dash))
	rules, err := os.ReadFile("../../docs/monitoring/countersign-alerts.yml")
	must(t, err)
	var exprs []string
	var rec strings.Builder
	rec.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, p := range dash.Panels {
		for j, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
			fmt.Fprintf(&rec, "      - record: dashboard:panel%d_%d\n        expr: %q\n", i, j, tg.Expr)
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("the dashboard has %d queries", len(exprs))
	}
	// A counter with no series yet (no Redis error so far) is not in the
	// exposition; its declaration is.
	declared, err := os.ReadFile("../../internal/telemetry/metrics.go")
	must(t, err)
	for _, name := range metricNameRE.FindAllString(strings.Join(exprs, " ")+string(rules), -1) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
		if !served[name] && !strings.Contains(string(declared), `"`+base+`"`) {
			t.Errorf("the monitoring docs query %s, which /metrics does not serve", name)
		}
	}
	path := t.TempDir() + "/dashboard-rules.yml"
	must(t, os.WriteFile(path, []byte(rec.String()), 0o600))
	promtool(t, "check", "rules", nil, path)
}

// promtool runs Prometheus's promtool on stdin, skipping without it.
func promtool(t *testing.T, cmd, sub string, stdin []byte, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("COUNTERSIGN_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("promtool is required (COUNTERSIGN_REQUIRE_PROMTOOL=1) but not installed")
		}
		t.Log("promtool is not installed (Debian: apt-get install prometheus); its check is skipped")
		return
	}
	c := exec.Command(bin, append([]string{cmd, sub}, args...)...)
	if stdin != nil {
		c.Stdin = strings.NewReader(string(stdin))
	}
	out, err := c.CombinedOutput()
	t.Logf("promtool %s %s: exit %v, output %q", cmd, sub, err, out)
	if err != nil || strings.TrimSpace(string(out)) != "" && !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool %s %s: %v\n%s", cmd, sub, err, out)
	}
}

// TestTracesExportedOverOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, spans
// reach an OTLP/HTTP collector (a real server decoding the JSON export
// requests against the OTLP protobuf definitions), named as the service,
// and are flushed at shutdown.
func TestTracesExportedOverOTLP(t *testing.T) {
	collector := otlptest.Start(t)
	srv := startService(t, serviceOpts{Env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}})
	if st, b := srv.call(t, "GET", "/v1/operations", srv.APIKey, ""); st != 200 {
		t.Fatalf("list: %d %s", st, b)
	}
	srv.stop(t) // flushes the batch
	var names []string
	var service string
	for _, req := range collector.Requests() {
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.name" {
					service = a.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
	}
	if service != "countersign" || !slices.Contains(names, "GET /v1/operations") {
		t.Fatalf("collector got service %q, spans %v; want countersign's GET /v1/operations", service, names)
	}
	if !strings.Contains(srv.Stderr.String(), "tracing: exporting spans over OTLP/HTTP") {
		t.Error("the start does not say where spans go")
	}
}
