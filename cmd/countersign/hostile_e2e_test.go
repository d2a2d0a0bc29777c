package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileService runs the http.request configuration of httpreq_test.go
// against a real target.
func hostileService(t *testing.T) (*testService, *e2eTarget) {
	t.Helper()
	target := &e2eTarget{doc: map[string]any{"title": "Standup", "start": "09:00", "end": "09:15"}}
	ts := httptest.NewServer(target)
	t.Cleanup(ts.Close)
	cfg, err := os.ReadFile(httpreqConfig(t, ts.URL))
	must(t, err)
	srv := startService(t, serviceOpts{Config: string(cfg), Env: map[string]string{"CAL_TOKEN": httpreqCred}})
	srv.APIKey = httpreqAPIKey
	return srv, target
}

var usedMemory = regexp.MustCompile(`(?m)^used_memory:(\d+)`)

// redisSize is the number of keys and, on a real Redis, the memory used.
// redisSize counts what an operation would leave (its keys, idempotency
// bindings, indexes, audit entries; not the principal's rate counters or
// the workers' own keys) and Redis's memory.
func redisSize(t *testing.T, srv *testService) (keys int64, mem int64) {
	t.Helper()
	c := redistest.Client(t, srv.RedisURL)
	ctx := context.Background()
	for _, pattern := range []string{"cs:*:o:*", "cs:*:e:*", "cs:*:ik:*", "cs:*:pi:*"} {
		n, err := c.Keys(ctx, pattern).Result()
		must(t, err)
		keys += int64(len(n))
	}
	for _, k := range c.Keys(ctx, "cs:*:a").Val() {
		keys += c.XLen(ctx, k).Val()
	}
	if redistest.Real() {
		info, err := c.Info(ctx, "memory").Result()
		must(t, err)
		if m := usedMemory.FindStringSubmatch(info); m != nil {
			mem, _ = strconv.ParseInt(m[1], 10, 64)
		}
	}
	return keys, mem
}

// TestHostileNestingStoresNothing: the example of issue 8, an http.request
// body of ~6 KB nested 3,000 arrays deep (and 18 KB, 9,000 deep), is
// refused at once with invalid_input naming the field, over REST and MCP,
// and Redis does not grow (against a real Redis: memory too).
func TestHostileNestingStoresNothing(t *testing.T) {
	srv, target := hostileService(t)
	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	// Warm up what a first request creates (the principal's rate counter).
	srv.call(t, "GET", "/v1/operations", srv.APIKey, "")
	keys0, mem0 := redisSize(t, srv)
	for _, depth := range []int{3000, 9000} {
		body := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		req := `{"action":"http.request","input":{"target":"calendar","method":"PATCH","path":"/events/7","body":{"title":` + body + `}}}`
		start := time.Now()
		st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, req)
		took := time.Since(start)
		e := decode[apiError](t, b)
		fields, _ := e.Error.Details["fields"].([]any)
		t.Logf("REST: %d-byte body nested %d deep: %d %s in %s", len(req), depth, st, e.Error.Code, took.Round(time.Microsecond))
		if st != 400 || e.Error.Code != "invalid_input" || e.Error.Details["rule"] != "max_depth" || len(fields) != 1 ||
			!strings.HasPrefix(fields[0].(map[string]any)["field"].(string), "input.body.title[0]") {
			t.Fatalf("REST %d deep: %d %s", depth, st, b)
		}
		if len(b) > 1024 {
			t.Fatalf("the refusal is %d bytes", len(b))
		}
	}
	// MCP: the SDK itself refuses the request past 1,000 levels (a JSON-RPC
	// parse error); from 33 levels on, the tool answers invalid_input.
	for _, depth := range []int{40, 900, 3000, 9000} {
		body := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "prepare_http_request", Arguments: map[string]any{
			"target": "calendar", "method": "PATCH", "path": "/events/7", "body": map[string]any{"title": rawJSON(body)}}})
		cancel()
		took := time.Since(start).Round(time.Microsecond)
		switch {
		case err != nil && depth > 990:
			t.Logf("MCP: nested %d deep: refused by the SDK (%v) in %s", depth, err, took)
		case err == nil && res.IsError && strings.Contains(fmt.Sprint(res.StructuredContent), "max_depth"):
			t.Logf("MCP: nested %d deep: invalid_input max_depth in %s", depth, took)
		default:
			t.Fatalf("MCP %d deep: %v %+v", depth, err, res)
		}
	}
	keys1, mem1 := redisSize(t, srv)
	t.Logf("Redis: %d keys before, %d after; used_memory %d before, %d after (%+d bytes)", keys0, keys1, mem0, mem1, mem1-mem0)
	if keys1 != keys0 {
		t.Errorf("Redis holds %d keys more", keys1-keys0)
	}
	if redistest.Real() && mem1-mem0 > 256<<10 {
		t.Errorf("Redis grew by %d bytes", mem1-mem0)
	}
	if _, writes := target.state(); writes != 0 {
		t.Fatal("a write reached the target")
	}
}

// rawJSON is JSON text passed through an MCP client as it is.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// TestHostileQueryAndConditions: query {"_method": "DELETE"} on a rule that
// lists no query parameters is policy_denied query_not_allowed; an amount
// written "5,000" or [5000] gets the two-approver route, never the lenient
// one.
func TestHostileQueryAndConditions(t *testing.T) {
	srv, _ := hostileService(t)
	st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey,
		`{"action":"http.request","input":{"target":"calendar","method":"PATCH","path":"/events/7","query":{"_method":"DELETE"},"body":{"title":"x"}}}`)
	if e := decode[apiError](t, b); st != 422 || e.Error.Code != "policy_denied" || e.Error.Details["rule"] != "query_not_allowed" {
		t.Fatalf("query _method: %d %s", st, b)
	}
	for _, amount := range []string{`5000`, `"5,000"`, `[5000]`, `{"value":5000}`, `"5000 "`, `null`} {
		st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey,
			`{"action":"http.request","input":{"target":"billing","method":"POST","path":"/invoices","body":{"amount":`+amount+`}}}`)
		if st != 201 {
			t.Fatalf("amount %s: %d %s", amount, st, b)
		}
		if o := decode[op](t, b); o.Approval.Required != 2 {
			t.Errorf("amount %s: %d approver(s) required, want the big-invoices route's 2", amount, o.Approval.Required)
		}
	}
	st, b = srv.call(t, "POST", "/v1/operations", srv.APIKey,
		`{"action":"http.request","input":{"target":"billing","method":"POST","path":"/invoices","body":{"amount":50}}}`)
	if o := decode[op](t, b); st != 201 || o.Approval.Required != 1 {
		t.Fatalf("a small invoice: %d %s", st, b)
	}
}

// TestCheckConfigSaysWhyAMalformedValueTakesARoute: check-config explains
// that "5,000" or a list cannot be evaluated, and that the route guarding
// against it is taken.
func TestCheckConfigSaysWhyAMalformedValueTakesARoute(t *testing.T) {
	path := httpreqConfig(t, "http://127.0.0.1:1")
	for _, args := range [][]string{
		{"--attr", "target=billing", "--attr", "body.amount=5,000"},
		{"--input", `{"target":"billing","method":"POST","path":"/invoices","body":{"amount":[5000]}}`},
	} {
		var out, errb strings.Builder
		args = append([]string{"check-config", "--action", "http.request", "--principal", "support-agent"}, append(args, path)...)
		if code := run(context.Background(), args, strings.NewReader(""), &out, &errb, noEnv); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		for _, want := range []string{"big-invoices: matches, taken because body.amount > 1000 cannot be evaluated",
			"a route whose condition cannot be evaluated is taken", `→ route "big-invoices": 2 of`} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out.String())
			}
		}
	}
}
