package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

func allowanceConfig() string {
	return fmt.Sprintf(`
principals:
  - id: support-agent
    api_key_sha256: "%s"
    scopes: [email.send]
operators:
  - {id: oncall, api_key_sha256: "%s"}
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com, groups: [owners]}
routes:
  - name: allowances
    match: {action: allowance.grant}
    approvers: {groups: [owners]}
    notify: [console]
  - name: outbound email
    match: {action: email.send}
    approvers: {groups: [owners]}
    notify: [console]
    allowances: allow
limits:
  email.send: {max_recipients: 3, allowed_domains: [client.example, other.example]}
`, testKeyHash, apiKeyHash(testOperatorKey))
}

// TestAllowanceEndToEnd: the agent asks for an allowance over REST, a
// human approves it by link, two emails to client.example go out without
// asking, a third (over budget) and one to another domain go to the human;
// an operator revokes it through the admin API.
func TestAllowanceEndToEnd(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: allowanceConfig(), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	st, raw := srv.call(t, "POST", "/v1/allowances", srv.APIKey, `{"action":"email.send","match":{"domains":["client.example"]},
		"budget":{"count":2},"ttl":"24h","reason":"the weekly invoice reminders"}`)
	if st != 201 {
		t.Fatalf("request allowance: %d %s", st, raw)
	}
	g := decode[op](t, raw)
	if g.Status != "pending_approval" || !strings.Contains(string(raw), "up to 2 emails to people at client.example") {
		t.Fatalf("allowance: %s", raw)
	}
	glink := srv.consoleLink(t, g.Key, "grace")
	if st, page := newBrowser().decide(t, glink, "approve", ""); st != 200 || !strings.Contains(page, "client.example") {
		t.Fatalf("approve the allowance: %d", st)
	}
	srv.waitFor(t, g.Key, "succeeded")
	// Grace's page now offers to revoke it.
	if _, page, _ := newBrowser().do(t, "GET", glink, nil); !strings.Contains(page, `id="revoke"`) {
		t.Fatal("the allowance's page offers no revocation")
	}

	send := func(to string) op {
		body := strings.Replace(emailBody, "client@client.example", to, 1)
		o := decode[op](t, mustCall(t, srv, "POST", "/v1/operations", body, 201))
		return decode[op](t, mustCall(t, srv, "POST", "/v1/operations/"+o.Key+"/send", "", 202))
	}
	for range 2 {
		o := send("client@client.example")
		if o.Status == "pending_approval" {
			t.Fatalf("within the allowance, pending: %+v", o)
		}
		srv.waitFor(t, o.Key, "succeeded")
	}
	if o := send("client@client.example"); o.Status != "pending_approval" {
		t.Fatalf("over budget: %s", o.Status)
	}
	if o := send("x@other.example"); o.Status != "pending_approval" {
		t.Fatalf("another domain: %s", o.Status)
	}
	if n := len(sentTo(smtp, "client@client.example")); n != 2 {
		t.Fatalf("%d emails went out", n)
	}
	// Revoked by grace on her page, and then (a second allowance) by the operator.
	b := newBrowser()
	_, page, _ := b.do(t, "GET", glink, nil)
	csrf := csrfRE.FindStringSubmatch(page)[1]
	if st, page, _ := b.do(t, "POST", glink+"/revoke", url.Values{"_csrf": {csrf}}); st != 200 || !strings.Contains(page, "You revoked the allowance") {
		t.Fatalf("revoke on the page: %d", st)
	}
	st, raw = srv.call(t, "POST", "/v1/allowances", srv.APIKey, `{"action":"email.send","budget":{"count":2},"ttl":"1h","reason":"again"}`)
	if st != 201 {
		t.Fatalf("second allowance: %d %s", st, raw)
	}
	g = decode[op](t, raw)
	if st, _ := newBrowser().decide(t, srv.consoleLink(t, g.Key, "grace"), "approve", ""); st != 200 {
		t.Fatal(st)
	}
	srv.waitFor(t, g.Key, "succeeded")
	// Revoked by the operator: audited on the allowance.
	if st, raw := srv.call(t, "POST", "/v1/admin/allowances/"+g.Key+"/revoke", testOperatorKey, ""); st != 200 {
		t.Fatalf("revoke: %d %s", st, raw)
	}
	if st, raw := srv.call(t, "POST", "/v1/admin/allowances/"+g.Key+"/revoke", srv.APIKey, ""); st != 401 {
		t.Fatalf("an agent key revoked: %d %s", st, raw)
	}
	_, evs := srv.call(t, "GET", "/v1/operations/"+g.Key+"/events", srv.APIKey, "")
	if !strings.Contains(string(evs), `"revoked"`) || !strings.Contains(string(evs), "operator:oncall") {
		t.Fatalf("events: %s", evs)
	}
}

func mustCall(t *testing.T, srv *testService, method, path, body string, want int) []byte {
	t.Helper()
	st, raw := srv.call(t, method, path, srv.APIKey, body)
	if st != want {
		t.Fatalf("%s %s: %d %s", method, path, st, raw)
	}
	return raw
}
