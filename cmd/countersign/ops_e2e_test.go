package main

import (
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/web"
)

const testOperatorKey = "cso_test_operator_key_for_end_to_end_tests"

// jumpClock is the real clock plus an offset that tests move forward.
type jumpClock struct{ offset atomic.Int64 }

func (c *jumpClock) Now() time.Time      { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *jumpClock) Add(d time.Duration) { c.offset.Add(int64(d)) }
func (s *testService) opsEnv(key string) map[string]string {
	return map[string]string{"COUNTERSIGN_URL": s.URL(), "COUNTERSIGN_OPERATOR_KEY": key}
}

// TestOpsAgainstDevelopmentMode is the operator's path end to end, on a
// development-mode service: the printed dev-operator key, ops list, cancel,
// an execution left hanging that the agent and ops list --stuck both
// report, and ops reconcile settling it, audited by the service itself.
func TestOpsAgainstDevelopmentMode(t *testing.T) {
	// The SMTP server holds its reply to the message: the operation stays
	// executing as if the process running it had stopped mid-write.
	smtp := smtptest.Start(t, smtptest.Options{Fail: smtptest.Fail{StallAfterData: 10 * time.Second}})
	clock := &jumpClock{}
	srv := startService(t, serviceOpts{Now: clock.Now, Env: map[string]string{
		"COUNTERSIGN_DEV_OPERATOR_KEY": testOperatorKey, "COUNTERSIGN_SMTP_URL": smtp.URL()}})
	if !strings.Contains(srv.Stderr.String(), "operator:  dev-operator, operator key: "+testOperatorKey) {
		t.Fatalf("the banner does not show dev-operator's key:\n%s", srv.Stderr.String())
	}
	env := srv.opsEnv(testOperatorKey)

	// Each key works on its own API only, both ways.
	if st, b := srv.call(t, "GET", "/v1/admin/operations", srv.APIKey, ""); st != 401 || !strings.Contains(string(b), "agent's API key") {
		t.Errorf("agent key on the admin API: %d %s", st, b)
	}
	if st, b := srv.call(t, "GET", "/v1/operations", testOperatorKey, ""); st != 401 || !strings.Contains(string(b), "operator key") {
		t.Errorf("operator key on the agent API: %d %s", st, b)
	}
	if st, b := srv.call(t, "POST", "/mcp", testOperatorKey, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); st != 401 {
		t.Errorf("operator key on /mcp: %d %s", st, b)
	}
	if code, _, stderr := runCLI(t, srv.opsEnv(srv.APIKey), "ops", "list"); code != 1 || !strings.Contains(stderr, "COUNTERSIGN_OPERATOR_KEY") {
		t.Errorf("ops with an agent's key: exit %d %s", code, stderr)
	}

	email := `{"action":"email.send","input":{"to":["ada@client.example"],"subject":"Invoice %s","text":"Hi"}}`
	st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, strings.Replace(email, "%s", "A", 1))
	if st != 201 {
		t.Fatalf("prepare: %d %s", st, b)
	}
	draft := decode[op](t, b)
	stuck := srv.prepareSend(t, strings.Replace(email, "%s", "B", 1))

	code, out, stderr := runCLI(t, env, "ops", "list", "--principal", "dev-agent")
	if code != 0 || !strings.Contains(out, draft.Key+"  draft") || !strings.Contains(out, stuck.Key) {
		t.Fatalf("ops list: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := runCLI(t, env, "ops", "list", "--status", "draft"); code != 0 || !strings.Contains(out, draft.Key) || strings.Contains(out, stuck.Key) {
		t.Errorf("ops list --status draft: exit %d\n%s", code, out)
	}
	if code, _, stderr := runCLI(t, env, "ops", "list", "--status", "bogus"); code != 2 || !strings.Contains(stderr, "must be one of") {
		t.Errorf("ops list --status bogus: exit %d %s", code, stderr)
	}

	// cancel, flags after the argument; audited by the service as the operator.
	if code, out, stderr := runCLI(t, env, "ops", "cancel", draft.Key); code != 0 || !strings.Contains(out, "is canceled") {
		t.Fatalf("ops cancel: exit %d %s%s", code, out, stderr)
	}
	waitForLog(t, srv, `"event":"canceled","actor":"operator:dev-operator"`)

	// The human approves; execution then hangs at the SMTP server.
	link := srv.consoleLink(t, stuck.Key, "you")
	if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	srv.waitFor(t, stuck.Key, "executing")
	if code, out, _ := runCLI(t, env, "ops", "list", "--stuck"); code != 0 || strings.Contains(out, stuck.Key) {
		t.Fatalf("just claimed is not stuck yet: exit %d\n%s", code, out)
	}
	clock.Add(6 * time.Minute)

	st, b = srv.call(t, "GET", "/v1/operations/"+stuck.Key, srv.APIKey, "")
	if v := decode[op](t, b); st != 200 || v.Status != "executing" || !strings.Contains(v.NextStep, "outcome is unknown") ||
		!strings.Contains(v.NextStep, "operator") {
		t.Errorf("the agent is not told it is stuck: %d %s", st, b)
	}
	code, out, stderr = runCLI(t, env, "ops", "list", "--stuck")
	if code != 0 || !strings.Contains(out, stuck.Key+"  executing (stuck)") {
		t.Fatalf("ops list --stuck: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := runCLI(t, env, "ops", "list", "--older-than", "1h", "--stuck"); code != 0 || !strings.Contains(out, "No operation has been executing for longer than 1h0m0s") {
		t.Errorf("ops list --stuck --older-than 1h: exit %d\n%s", code, out)
	}

	// reconcile: the note is required; flags may follow the key.
	if code, _, stderr := runCLI(t, env, "ops", "reconcile", stuck.Key, "--outcome", "succeeded"); code != 2 || !strings.Contains(stderr, "--note") {
		t.Errorf("reconcile without a note: exit %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, env, "ops", "reconcile", stuck.Key, "--outcome", "maybe", "--note", "x"); code != 2 {
		t.Errorf("reconcile --outcome maybe: exit %d %s", code, stderr)
	}
	// Its executor is alive (stalled at the SMTP server) and holds its
	// lease: only an unknown settlement is accepted.
	if code, _, stderr := runCLI(t, env, "ops", "reconcile", stuck.Key, "--outcome", "succeeded", "--note", "found it in the mailbox"); code != 1 ||
		!strings.Contains(stderr, "invalid_state") || !strings.Contains(stderr, "lease") {
		t.Errorf("reconcile as succeeded while the executor's lease is live: exit %d %s", code, stderr)
	}
	code, out, stderr = runCLI(t, env, "ops", "reconcile", stuck.Key, "--outcome", "unknown", "--note", "found it in the mailbox")
	if code != 0 || !strings.Contains(out, stuck.Key+" is failed with its outcome unknown") {
		t.Fatalf("ops reconcile: exit %d %s%s", code, out, stderr)
	}
	waitForLog(t, srv, `"event":"reconciled","actor":"operator:dev-operator"`)
	if code, _, stderr := runCLI(t, env, "ops", "reconcile", "--note", "again", "--outcome", "failed", stuck.Key); code != 1 || !strings.Contains(stderr, "invalid_state") {
		t.Errorf("a second reconcile: exit %d %s", code, stderr)
	}

	code, out, _ = runCLI(t, env, "ops", "show", stuck.Key)
	var shown struct {
		Operation struct {
			Status    string `json:"status"`
			Principal string `json:"principal"`
		} `json:"operation"`
		Events []struct {
			Event   string         `json:"event"`
			Actor   string         `json:"actor"`
			Details map[string]any `json:"details"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil {
		t.Fatalf("ops show: exit %d %v\n%s", code, err, out)
	}
	var last struct {
		Event   string         `json:"event"`
		Actor   string         `json:"actor"`
		Details map[string]any `json:"details"`
	}
	for _, ev := range shown.Events {
		if ev.Event == "reconciled" {
			last = ev
		}
	}
	if shown.Operation.Status != "failed" || shown.Operation.Principal != "dev-agent" || last.Event != "reconciled" ||
		last.Actor != "operator:dev-operator" || last.Details["note"] != "found it in the mailbox" || last.Details["outcome"] != "unknown" {
		t.Errorf("ops show: %+v", shown)
	}
	// The stalled SMTP server lets the message through: the executor's
	// outcome arrives after the settlement and is shown as the late outcome.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, out, _ = runCLI(t, env, "ops", "show", stuck.Key)
		if strings.Contains(out, `"late_outcome"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ops show has no late outcome:\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(out, `"event": "late_outcome"`) || !strings.Contains(out, `"status": "failed"`) {
		t.Errorf("ops show after the late outcome:\n%s", out)
	}

	if code, _, stderr := runCLI(t, srv.opsEnv("cso_wrong"), "ops", "show", stuck.Key); code != 1 || !strings.Contains(stderr, "unknown operator key") {
		t.Errorf("a wrong operator key: exit %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, map[string]string{"COUNTERSIGN_URL": "http://127.0.0.1:1", "COUNTERSIGN_OPERATOR_KEY": "k"}, "ops", "list"); code != 1 ||
		!strings.Contains(stderr, "is countersign serve running") {
		t.Errorf("nothing listening: exit %d %s", code, stderr)
	}
}

func waitForLog(t *testing.T, s *testService, want string) {
	t.Helper()
	// The audit goes to stderr, or to its file (development mode's default).
	read := func() string {
		out := s.Stderr.String()
		if s.AuditPath != "" {
			b, _ := os.ReadFile(s.AuditPath)
			out += string(b)
		}
		return out
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(read(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the service's log and audit lack %s:\n%s", want, read())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOpenAPIServed: GET /openapi.json is the description in the
// repository, byte for byte, and every path it names is answered.
func TestOpenAPIServed(t *testing.T) {
	srv := startService(t, serviceOpts{Env: map[string]string{"COUNTERSIGN_DEV_OPERATOR_KEY": testOperatorKey}})
	st, b := srv.call(t, "GET", "/openapi.json", "", "")
	if st != 200 || string(b) != string(web.OpenAPI) {
		t.Fatalf("GET /openapi.json: %d, %d bytes (want the %d of web/openapi.json)", st, len(b), len(web.OpenAPI))
	}
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	must(t, json.Unmarshal(b, &doc))
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	for _, want := range []string{"/v1/operations", "/v1/operations/{key}", "/v1/admin/operations", "/v1/admin/operations/{key}/reconcile"} {
		if _, ok := doc.Paths[want]; !ok {
			t.Errorf("the description lacks %s", want)
		}
	}
	// The GETs without parameters answer as described (apiCheck validates).
	for _, p := range []struct{ path, key string }{{"/healthz", ""}, {"/readyz", ""}, {"/v1/operations", srv.APIKey}, {"/v1/admin/operations", testOperatorKey}} {
		if st, b := srv.call(t, "GET", p.path, p.key, ""); st != 200 {
			t.Errorf("GET %s: %d %s", p.path, st, b)
		}
	}
}
