package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/mcpserver"
)

// TestAllowanceNotHonouredRefused: an allowance for email.send (always
// irreversible) where the route does not say allowances: allow would be
// approved and then never used; REST and MCP refuse it at once with
// policy_denied / allowance_not_honoured, and nothing is stored. Where a
// route the allowance's operations could take says allow, it is accepted.
func TestAllowanceNotHonouredRefused(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	cfg := strings.Replace(allowanceConfig(), "    allowances: allow\n", "", 1)
	cfg = strings.Replace(cfg, "routes:\n", `routes:
  - name: trusted domain
    match: {action: email.send, attrs: {domains: trusted.example}}
    approvers: {groups: [owners]}
    notify: [console]
    allowances: allow
`, 1)
	srv := startService(t, serviceOpts{Config: cfg, Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})

	body := `{"action":"email.send","match":{"domains":["client.example"]},"budget":{"count":2},"ttl":"24h","reason":"weekly reminders"}`
	st, raw := srv.call(t, "POST", "/v1/allowances", srv.APIKey, body)
	var e struct{ Error approval.Error }
	if err := json.Unmarshal(raw, &e); err != nil || st != 422 || e.Error.Code != approval.CodePolicyDenied ||
		e.Error.Details["rule"] != approval.RuleAllowanceNotHonoured || !strings.Contains(e.Error.Message, `"outbound email"`) ||
		!strings.Contains(e.Error.Message, "allowances: allow") {
		t.Fatalf("REST: %d %s", st, raw)
	}

	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	var args map[string]any
	must(t, json.Unmarshal([]byte(body), &args))
	out := mcpCall(t, cs, mcpserver.ToolRequestAllowance, args)
	if out.err == nil || out.err.Code != approval.CodePolicyDenied || out.err.Details["rule"] != approval.RuleAllowanceNotHonoured {
		t.Fatalf("MCP: %+v %q", out.err, out.text)
	}

	if st, raw := srv.call(t, "GET", "/v1/operations", srv.APIKey, ""); st != 200 || strings.Contains(string(raw), approval.GrantAction) {
		t.Fatalf("a refused allowance was stored: %d %s", st, raw)
	}

	// Pinned to the domain whose route honours allowances: accepted.
	st, raw = srv.call(t, "POST", "/v1/allowances", srv.APIKey,
		`{"action":"email.send","match":{"domains":["trusted.example"]},"budget":{"count":2},"ttl":"24h","reason":"trusted"}`)
	if st != 201 {
		t.Fatalf("an allowance a route honours: %d %s", st, raw)
	}
}

// TestAllowanceNotHonouredForHTTPWrites: the same rule for http.request.
// An allowance pinned to POSTs (irreversible) on billing, whose routes do
// not say allowances: allow, is refused at once naming both routes its
// writes could take; one that leaves the method open is accepted, and its
// page says POST and DELETE requests still go to a person; once the
// invoices route says allow, the POST allowance is accepted and says
// nothing of the kind.
func TestAllowanceNotHonouredForHTTPWrites(t *testing.T) {
	cfg, err := os.ReadFile(httpreqConfig(t, "http://127.0.0.1:1"))
	must(t, err)
	base := strings.Replace(string(cfg), "routes:\n", `routes:
  - name: allowances
    match: {action: allowance.grant}
    approvers: {groups: [finance]}
    notify: [console]
`, 1)
	posts := `{"action":"http.request","match":{"target":["billing"],"method":["POST"]},"budget":{"count":2},"ttl":"1h","reason":"invoices"}`
	open := `{"action":"http.request","match":{"target":["billing"]},"budget":{"count":2},"ttl":"1h","reason":"invoices"}`

	srv := startService(t, serviceOpts{Config: base, Env: map[string]string{"CAL_TOKEN": httpreqCred}})
	srv.APIKey = httpreqAPIKey
	st, raw := srv.call(t, "POST", "/v1/allowances", srv.APIKey, posts)
	var e struct{ Error approval.Error }
	if err := json.Unmarshal(raw, &e); err != nil || st != 422 || e.Error.Code != approval.CodePolicyDenied ||
		e.Error.Details["rule"] != approval.RuleAllowanceNotHonoured || fmt.Sprint(e.Error.Details["routes"]) != "[big-invoices invoices]" {
		t.Fatalf("POSTs, no route allows: %d %s", st, raw)
	}
	if st, raw := srv.call(t, "GET", "/v1/operations", srv.APIKey, ""); st != 200 || strings.Contains(string(raw), approval.GrantAction) {
		t.Fatalf("a refused allowance was stored: %d %s", st, raw)
	}
	st, raw = srv.call(t, "POST", "/v1/allowances", srv.APIKey, open)
	if st != 201 {
		t.Fatalf("method left open: %d %s", st, raw)
	}
	g := decode[op](t, raw)
	_, page, _ := newBrowser().do(t, "GET", srv.consoleLink(t, g.Key, "grace"), nil)
	if !strings.Contains(page, "never approves POST and DELETE requests") || !strings.Contains(page, "still go to a person") {
		t.Fatalf("the page does not say which writes still go to a person:\n%s", page)
	}

	allow := strings.Replace(base, "  - name: invoices\n    match: {action: http.request, target: billing}\n",
		"  - name: invoices\n    match: {action: http.request, target: billing}\n    allowances: allow\n", 1)
	if allow == base {
		t.Fatal("the config changed: no invoices route")
	}
	srv2 := startService(t, serviceOpts{Config: allow, Env: map[string]string{"CAL_TOKEN": httpreqCred}})
	srv2.APIKey = httpreqAPIKey
	st, raw = srv2.call(t, "POST", "/v1/allowances", srv2.APIKey, posts)
	if st != 201 || strings.Contains(string(raw), "still go to a person") {
		t.Fatalf("POSTs, the route allows: %d %s", st, raw)
	}
}
