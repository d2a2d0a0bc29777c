package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/client"
)

// The client's happy paths run against the real REST API in mcpserver's
// tests (the rest-bridge transport) and end to end through `countersign
// mcp`; these tests pin what it does with everything else.

func TestNewChecksItsArguments(t *testing.T) {
	for _, c := range []struct{ url, key string }{
		{"", "k"}, {"127.0.0.1:8080", "k"}, {"ftp://host", "k"}, {"http://user:pw@host", "k"},
		{"http://host/?x=1", "k"}, {"http://host", ""}, {"http://host", "  "},
	} {
		if _, err := client.New(c.url, c.key, nil); err == nil {
			t.Errorf("New(%q, %q) accepted", c.url, c.key)
		}
	}
	c, err := client.New(" http://127.0.0.1:8080/ ", "k", nil)
	if err != nil || c.BaseURL() != "http://127.0.0.1:8080" {
		t.Fatalf("New: %v %v", c, err)
	}
}

// recorder answers every request with status and body, and keeps what it
// was asked.
type recorder struct {
	status int
	body   string
	header http.Header
	reqs   []*http.Request
	bodies []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.reqs = append(r.reqs, req)
	r.bodies = append(r.bodies, string(b))
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(r.status)
	_, _ = io.WriteString(w, r.body)
}

func serve(t *testing.T, r *recorder) *client.Client {
	t.Helper()
	ts := httptest.NewServer(r)
	t.Cleanup(ts.Close)
	c, err := client.New(ts.URL+"/base", "cs_key", &client.Options{UserAgent: "test-agent"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRequestsFollowTheContract(t *testing.T) {
	view := `{"operation_key":"op_aaaaaaaaaaaaaaaaaaaaaaaaaa","status":"draft"}`
	r := &recorder{status: 201, body: view}
	c := serve(t, r)
	ctx := context.Background()
	key := "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"

	v, created, err := c.Prepare(ctx, approval.PrepareCall{Action: "email.send", Input: json.RawMessage(`{"to":["a@b.example"]}`), IdempotencyKey: "k1"})
	if err != nil || !created || v.OperationKey != key {
		t.Fatalf("Prepare: %+v %v %v", v, created, err)
	}
	r.status = 200
	if _, created, _ := c.Prepare(ctx, approval.PrepareCall{Action: "email.send", Input: json.RawMessage(`{}`)}); created {
		t.Error("200 reported as created")
	}
	_, _ = c.Send(ctx, key)
	_, _ = c.Get(ctx, key, 1500*time.Millisecond)
	_, _ = c.Cancel(ctx, key)
	_, _, _ = c.PrepareUndo(ctx, key)
	r.body = `{"operations":[` + view + `]}`
	ops, err := c.List(ctx, approval.StatusPending)
	if err != nil || len(ops) != 1 {
		t.Fatalf("List: %v %v", ops, err)
	}
	want := []string{
		"POST /base/v1/operations", "POST /base/v1/operations",
		"POST /base/v1/operations/" + key + "/send", "GET /base/v1/operations/" + key + "?wait=2",
		"POST /base/v1/operations/" + key + "/cancel", "POST /base/v1/operations/" + key + "/undo",
		"GET /base/v1/operations?status=pending_approval",
	}
	for i, req := range r.reqs {
		got := req.Method + " " + req.URL.RequestURI()
		if i < len(want) && got != want[i] {
			t.Errorf("request %d = %s, want %s", i, got, want[i])
		}
		if req.Header.Get("Authorization") != "Bearer cs_key" || req.Header.Get("User-Agent") != "test-agent" {
			t.Errorf("request %d headers: %v", i, req.Header)
		}
	}
	if !strings.Contains(r.bodies[0], `"idempotency_key":"k1"`) || !strings.Contains(r.bodies[0], `"action":"email.send"`) {
		t.Errorf("prepare body = %s", r.bodies[0])
	}
}

func TestErrorsAreCoded(t *testing.T) {
	ctx := context.Background()
	key := "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	for _, c := range []struct {
		name   string
		rec    *recorder
		code   approval.Code
		inText string
	}{
		{"contract error", &recorder{status: 409, body: `{"error":{"code":"invalid_state","message":"cannot send: it is rejected","details":{"status":"rejected"}}}`}, approval.CodeInvalidState, "cannot send"},
		{"rate limited", &recorder{status: 429, body: `{"error":{"code":"rate_limited","message":"slow down"}}`, header: http.Header{"Retry-After": {"7"}}}, approval.CodeRateLimited, "slow down"},
		{"proxy 502", &recorder{status: 502, body: "<html>bad gateway</html>"}, approval.CodeUnavailable, "502"},
		{"wrong URL 404", &recorder{status: 404, body: "<html>not found</html>"}, approval.CodeUnavailable, "is the service URL right"},
		{"proxy 401", &recorder{status: 401, body: "nope"}, approval.CodeUnauthenticated, "401"},
		{"garbage 200", &recorder{status: 200, body: "<html>"}, approval.CodeUnavailable, "not the expected JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := serve(t, c.rec).Send(ctx, key)
			var e *approval.Error
			if !asError(err, &e) || e.Code != c.code || !strings.Contains(e.Message, c.inText) {
				t.Fatalf("err = %v, want %s containing %q", err, c.code, c.inText)
			}
			if strings.Contains(e.Message, "<html>") {
				t.Errorf("a foreign body reached the message: %q", e.Message)
			}
			if c.code == approval.CodeRateLimited && e.Details["retry_after_seconds"] != 7 {
				t.Errorf("details = %v", e.Details)
			}
		})
	}

	// An ill-formed key never becomes part of a path.
	r := &recorder{status: 200, body: "{}"}
	cl := serve(t, r)
	for _, bad := range []string{"", "../../admin", "op_short", "op_aaaaaaaaaaaaaaaaaaaaaaaaaa/cancel"} {
		if _, err := cl.Get(ctx, bad, 0); approval.ErrorCode(err) != approval.CodeNotFound {
			t.Errorf("Get(%q) = %v", bad, err)
		}
	}
	if len(r.reqs) != 0 {
		t.Errorf("%d requests for ill-formed keys", len(r.reqs))
	}

	// Nothing listening: unavailable; a POST says it may have arrived
	// only when it may have.
	dead, _ := client.New("http://127.0.0.1:1", "k", nil)
	_, _, err := dead.Prepare(ctx, approval.PrepareCall{Action: "email.send"})
	if approval.ErrorCode(err) != approval.CodeUnavailable || !strings.Contains(err.Error(), "cannot connect") ||
		strings.Contains(err.Error(), "may or may not") {
		t.Errorf("dead service: %v", err)
	}
	slow := &recorder{status: 200, body: "{}"}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(300 * time.Millisecond); slow.ServeHTTP(w, r) }))
	defer ts.Close()
	sc, _ := client.New(ts.URL, "k", &client.Options{Timeout: 50 * time.Millisecond})
	_, _, err = sc.Prepare(ctx, approval.PrepareCall{Action: "email.send"})
	if approval.ErrorCode(err) != approval.CodeUnavailable || !strings.Contains(err.Error(), "may or may not") {
		t.Errorf("timed-out POST: %v", err)
	}
}

func asError(err error, target **approval.Error) bool {
	e, ok := err.(*approval.Error)
	if ok {
		*target = e
	}
	return ok
}
