package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

// consoleLinks lists every link the console printed for approver on key,
// oldest first (a reminder prints a new one).
func (s *testService) consoleLinks(key, approver string) []string {
	var links []string
	for _, m := range consoleLinkRE.FindAllStringSubmatch(s.Stderr.String(), -1) {
		if m[1] == approver && m[2] == key {
			links = append(links, m[3])
		}
	}
	return links
}

func (s *testService) waitConsoleLinks(t *testing.T, key, approver string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if links := s.consoleLinks(key, approver); len(links) >= n {
			return links
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d links on %s, want %d", approver, len(s.consoleLinks(key, approver)), key, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReminderAndEscalationEndToEnd: through the running service, nobody
// answers; grace is reminded with a new link (the old one stops working),
// then ada is added by the escalation and her approval executes it. The
// agent's status tells it both happened.
func TestReminderAndEscalationEndToEnd(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	cfg := fmt.Sprintf(`
principals:
  - id: support-agent
    api_key_sha256: "%s"
    scopes: [email.send]
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com, groups: [owners]}
  - {id: ada, name: Ada Lovelace, email: ada@example.com, groups: [leads]}
routes:
  - name: outbound email
    match: {action: email.send}
    approvers: {groups: [owners]}
    notify: [console]
    approval_ttl: 1m
    remind: [1s]
    escalate: {after: 3s, approvers: {groups: [leads]}}
limits:
  email.send: {max_recipients: 3, allowed_domains: [client.example]}
`, testKeyHash)
	srv := startService(t, serviceOpts{Config: cfg, Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	o := decode[op](t, mustCall(t, srv, "POST", "/v1/operations", emailBody, 201))
	mustCall(t, srv, "POST", "/v1/operations/"+o.Key+"/send", "", 202)

	sent := time.Now()
	// Grace opens her first link and leaves the page open.
	stale := newBrowser()
	first := srv.waitConsoleLinks(t, o.Key, "grace", 1)[0]
	_, page, _ := stale.do(t, "GET", first, nil)
	csrf := csrfRE.FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("no form on grace's page:\n%s", page)
	}
	grace := srv.waitConsoleLinks(t, o.Key, "grace", 2)
	t.Logf("reminder to grace %.1fs after the send", time.Since(sent).Seconds())
	if st, page, _ := newBrowser().do(t, "GET", grace[0], nil); st != 410 || !strings.Contains(page, "A newer link replaced this one") {
		t.Errorf("the link the reminder replaced: %d", st)
	}
	// The page she left open no longer decides.
	if st, _, _ := stale.do(t, "POST", first, url.Values{"_csrf": {csrf[1]}, "decision": {"approve"}}); st == 200 {
		t.Errorf("the replaced link decided")
	}
	ada := srv.waitConsoleLinks(t, o.Key, "ada", 1)
	t.Logf("escalation to ada %.1fs after the send", time.Since(sent).Seconds())
	_, raw := srv.call(t, "GET", "/v1/operations/"+o.Key, srv.APIKey, "")
	if !strings.Contains(string(raw), `"reminded"`) || !strings.Contains(string(raw), `"escalated"`) {
		t.Errorf("the agent is not told of the reminder and the escalation: %s", raw)
	}
	if st, _ := newBrowser().decide(t, ada[len(ada)-1], "approve", ""); st != 200 {
		t.Fatalf("ada approves: %d", st)
	}
	srv.waitFor(t, o.Key, "succeeded")
	if n := len(sentTo(smtp, "client@client.example")); n != 1 {
		t.Fatalf("%d emails went out", n)
	}
	_, evs := srv.call(t, "GET", "/v1/operations/"+o.Key+"/events", srv.APIKey, "")
	for _, want := range []string{`"reminded"`, `"escalated"`, `"approved"`, `"succeeded"`} {
		if !strings.Contains(string(evs), want) {
			t.Errorf("events lack %s: %s", want, evs)
		}
	}
}
