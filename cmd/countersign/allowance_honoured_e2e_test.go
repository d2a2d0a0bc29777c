package main

import (
	"encoding/json"
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
