package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

// loopConfig: grace approves email.send by email; ada and grace are both
// needed for quorum tests.
func loopConfig(required int, notify string) string {
	return fmt.Sprintf(`
principals:
  - id: support-agent
    api_key_sha256: "%s"
    scopes: [email.send]
    on_behalf_of: sam
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com, groups: [owners]}
  - {id: ada, name: Ada Lovelace, email: ada@example.com, groups: [owners]}
  - {id: sam, name: Sam Lee, email: sam@example.com, groups: [staff, owners]}
routes:
  - name: outbound email
    match: {action: email.send}
    approvers: {groups: [owners]}
    required: %d
    notify: [%s]
    approval_ttl: 1h
    forbid_self_approval: true
limits:
  email.send: {max_recipients: 3, allowed_domains: [client.example]}
`, testKeyHash, required, notify)
}

const emailBody = `{"action":"email.send","input":{"to":["Client <client@client.example>"],"subject":"Your invoice","text":"Hello,\nthe invoice is attached.\n"}}`

// approvalLink waits for the approval email to approver and returns the link in it.
func approvalLink(t *testing.T, smtp *smtptest.Server, approver string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	re := regexp.MustCompile(`https?://\S+/a/[A-Za-z0-9_.-]+`)
	for time.Now().Before(deadline) {
		for _, m := range smtp.Messages() {
			if len(m.To) == 1 && m.To[0] == approver {
				p, err := m.Parse()
				if err != nil {
					t.Fatal(err)
				}
				if link := re.FindString(p.Text); link != "" {
					return link
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no approval email to %s", approver)
	return ""
}

// sentTo returns the messages delivered to addr.
func sentTo(smtp *smtptest.Server, addr string) []smtptest.Message {
	var out []smtptest.Message
	for _, m := range smtp.Messages() {
		for _, r := range m.To {
			if r == addr {
				out = append(out, m)
			}
		}
	}
	return out
}

func TestEndToEndEmailLoop(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})

	o := srv.prepareSend(t, emailBody)
	if o.Status != "pending_approval" {
		t.Fatalf("after send: %s", o.Status)
	}
	// sam works for the agent and must not be asked; grace and ada are.
	link := approvalLink(t, smtp, "grace@example.com")
	approvalLink(t, smtp, "ada@example.com")
	if n := len(sentTo(smtp, "sam@example.com")); n != 0 {
		t.Fatalf("the on-behalf-of human got %d approval emails", n)
	}

	// Mail scanners and previewers open links: GET and HEAD decide nothing.
	b := newBrowser()
	for _, method := range []string{"GET", "HEAD", "GET"} {
		st, page, h := b.do(t, method, link, nil)
		if st != 200 {
			t.Fatalf("%s: %d", method, st)
		}
		if method == "GET" && !strings.Contains(page, "Your invoice") {
			t.Fatalf("page does not show the operation:\n%s", page)
		}
		for k, v := range map[string]string{"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
			if h.Get(k) != v {
				t.Errorf("%s %s = %q, want %q", method, k, h.Get(k), v)
			}
		}
		if !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("CSP %q", h.Get("Content-Security-Policy"))
		}
	}
	if cur := srv.waitFor(t, o.Key, "pending_approval"); len(cur.Approval.Approvals) != 0 {
		t.Fatal("opening the link decided something")
	}

	st, page := b.decide(t, link, "approve", "")
	if st != 200 || !strings.Contains(page, "You approved it.") {
		t.Fatalf("approve: %d\n%s", st, page)
	}
	done := srv.waitFor(t, o.Key, "succeeded")
	var res struct {
		MessageID string   `json:"message_id"`
		Accepted  []string `json:"accepted"`
	}
	must(t, json.Unmarshal(done.Result, &res))
	if !strings.HasPrefix(res.MessageID, "<"+o.Key+"@") || len(res.Accepted) != 1 {
		t.Fatalf("result %s", done.Result)
	}

	// Exactly one message reached the client, exactly as previewed.
	msgs := sentTo(smtp, "client@client.example")
	if len(msgs) != 1 {
		t.Fatalf("%d messages to the client, want 1", len(msgs))
	}
	p, err := msgs[0].Parse()
	must(t, err)
	preview := map[string]string{}
	for _, f := range o.Preview.Fields {
		preview[f.Name] = f.Value
	}
	if p.Text != preview["text"] || p.Subject != preview["subject"] {
		t.Fatalf("sent text %q subject %q; previewed %q %q", p.Text, p.Subject, preview["text"], preview["subject"])
	}
	if got := p.Header.Get("Message-Id"); got != res.MessageID {
		t.Fatalf("Message-ID %q, result says %q", got, res.MessageID)
	}

	// The audit answers who approved what, seeing which hash, through which channel.
	st, evb := srv.call(t, "GET", "/v1/operations/"+o.Key+"/events", srv.APIKey, "")
	if st != 200 {
		t.Fatalf("events: %d", st)
	}
	var evs struct {
		Events []struct {
			Event, Actor, Channel string
			PayloadHash           string `json:"payload_hash"`
		} `json:"events"`
	}
	must(t, json.Unmarshal(evb, &evs))
	found := false
	for _, e := range evs.Events {
		if e.Event == "approval" {
			found = e.Actor == "approver:grace" && e.Channel == "email" && e.PayloadHash == o.PayloadHash
		}
	}
	if !found {
		t.Fatalf("no approval event by grace via email with the payload hash: %s", evb)
	}

	// The link is spent: a second visit explains, with 409.
	if st, _, _ := b.do(t, "GET", link, nil); st != 409 {
		t.Fatalf("used link: %d, want 409", st)
	}
	assertNoCapabilities(t, []string{link}, map[string]string{"responses": srv.Transcript.String(), "log": srv.Stderr.String()})
}

func TestConcurrentApprovalsAcrossReplicasExecuteOnce(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	env := map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}
	a := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: env})
	b := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: env, RedisURL: a.RedisURL})

	o := a.prepareSend(t, emailBody)
	link := approvalLink(t, smtp, "grace@example.com")
	other := approvalLink(t, smtp, "ada@example.com")

	// One person, one page, 50 concurrent POSTs of the same form, split
	// across both replicas; and ada approving at the same moment.
	br := newBrowser()
	st, page, _ := br.do(t, "GET", link, nil)
	if st != 200 {
		t.Fatal(st)
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]
	adaBrowser := newBrowser()
	otherB := strings.Replace(other, a.URL(), b.URL(), 1)
	st, page, _ = adaBrowser.do(t, "GET", otherB, nil)
	if st != 200 {
		t.Fatal(st)
	}
	adaCSRF := csrfRE.FindStringSubmatch(page)[1]
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target := link
			if i%2 == 1 {
				target = strings.Replace(link, a.URL(), b.URL(), 1)
			}
			st, _, _ := br.do(t, "POST", target, url.Values{"_csrf": {csrf}, "decision": {"approve"}})
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		adaBrowser.do(t, "POST", otherB, url.Values{"_csrf": {adaCSRF}, "decision": {"approve"}})
	}()
	wg.Wait()
	// At most one of grace's POSTs is recorded (none if ada's approval
	// reached the quorum of one first); every other one is told it is over.
	if statuses[200] > 1 || statuses[200]+statuses[409] != 50 {
		t.Fatalf("statuses %v: want at most one 200 and the rest 409", statuses)
	}
	if done := a.waitFor(t, o.Key, "succeeded"); len(done.Approval.Approvals) != 1 {
		t.Fatalf("approvals %+v: want exactly one (quorum 1)", done.Approval.Approvals)
	}
	time.Sleep(300 * time.Millisecond) // any second execution would land now
	if n := len(sentTo(smtp, "client@client.example")); n != 1 {
		t.Fatalf("%d executions, want exactly 1", n)
	}
	assertNoCapabilities(t, []string{link, other}, map[string]string{"responses": a.Transcript.String(), "log a": a.Stderr.String(), "log b": b.Stderr.String()})
}

func TestQuorumOfTwoAndSelfApproval(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(2, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	o := srv.prepareSend(t, emailBody)
	g, a := approvalLink(t, smtp, "grace@example.com"), approvalLink(t, smtp, "ada@example.com")
	if st, _ := newBrowser().decide(t, g, "approve", ""); st != 200 {
		t.Fatalf("grace: %d", st)
	}
	cur := srv.waitFor(t, o.Key, "pending_approval")
	if len(cur.Approval.Approvals) != 1 || !strings.Contains(cur.NextStep, "Waiting for 1 human approval") {
		t.Fatalf("after one of two: %+v %q", cur.Approval, cur.NextStep)
	}
	// grace again, from a fresh browser: her link is spent.
	if st, _, _ := newBrowser().do(t, "GET", g, nil); st != 409 {
		t.Fatalf("grace again: %d", st)
	}
	if st, _ := newBrowser().decide(t, a, "approve", ""); st != 200 {
		t.Fatalf("ada: %d", st)
	}
	srv.waitFor(t, o.Key, "succeeded")
	if n := len(sentTo(smtp, "client@client.example")); n != 1 {
		t.Fatalf("%d executions", n)
	}
}

func TestRejectionReasonReachesAgent(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	o := srv.prepareSend(t, emailBody)
	link := approvalLink(t, smtp, "grace@example.com")
	st, page := newBrowser().decide(t, link, "reject", "Wrong invoice: send the November one")
	if st != 200 || !strings.Contains(page, "You rejected it.") {
		t.Fatalf("reject: %d\n%s", st, page)
	}
	cur := srv.waitFor(t, o.Key, "rejected")
	if cur.Approval.Rejection == nil || cur.Approval.Rejection.Reason != "Wrong invoice: send the November one" ||
		!strings.Contains(cur.NextStep, "Wrong invoice") {
		t.Fatalf("rejection %+v next %q", cur.Approval.Rejection, cur.NextStep)
	}
	// ada's link now explains that it is over, and nothing ran.
	if st, _, _ := newBrowser().do(t, "GET", approvalLink(t, smtp, "ada@example.com"), nil); st != 409 {
		t.Fatalf("ada after rejection: %d", st)
	}
	if n := len(sentTo(smtp, "client@client.example")); n != 0 {
		t.Fatalf("a rejected email was sent")
	}
}

func TestRestartBetweenSendAndDeliveryAndBetweenApprovalAndExecution(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	env := map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}
	// A service that accepts requests but dies before its workers run.
	first := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: env, Workers: -1})
	o := first.prepareSend(t, emailBody)
	first.stop(t)
	if n := len(smtp.Messages()); n != 0 {
		t.Fatalf("%d emails before any worker ran", n)
	}

	// Restarted: the notifications go out.
	second := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: env, RedisURL: first.RedisURL, Workers: -1})
	third := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: env, RedisURL: first.RedisURL})
	link := approvalLink(t, smtp, "grace@example.com")
	third.stop(t)

	// Approved on a replica without workers, which then dies: the next
	// replica executes it.
	if st, _ := newBrowser().decide(t, strings.Replace(link, third.URL(), second.URL(), 1), "approve", ""); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	second.waitFor(t, o.Key, "approved")
	second.stop(t)
	fourth := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: env, RedisURL: first.RedisURL})
	fourth.waitFor(t, o.Key, "succeeded")
	if n := len(sentTo(smtp, "client@client.example")); n != 1 {
		t.Fatalf("%d executions", n)
	}
}

func TestKillSwitchEndToEnd(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	env := map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}
	on := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: env, Workers: -1})
	o := on.prepareSend(t, emailBody)
	off := startService(t, serviceOpts{Config: loopConfig(1, "email"), RedisURL: on.RedisURL,
		Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL(), "COUNTERSIGN_WRITES": "off"}})
	link := approvalLink(t, smtp, "grace@example.com")

	// Sending new work is refused while writes are off; nothing is consumed.
	st, b := off.call(t, "POST", "/v1/operations", off.APIKey, emailBody)
	if st != 201 {
		t.Fatal(st)
	}
	d := decode[op](t, b)
	if st, b := off.call(t, "POST", "/v1/operations/"+d.Key+"/send", off.APIKey, ""); st != 503 ||
		decode[apiError](t, b).Error.Code != "writes_disabled" {
		t.Fatalf("send with writes off: %d %s", st, b)
	}

	if st, _ := newBrowser().decide(t, strings.Replace(link, on.URL(), off.URL(), 1), "approve", ""); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	time.Sleep(time.Second)
	if cur := off.waitFor(t, o.Key, "approved"); cur.Status != "approved" || len(sentTo(smtp, "client@client.example")) != 0 {
		t.Fatalf("ran with writes off")
	}
	on.stop(t)
	off.stop(t)
	// Writes on again: it runs, once.
	back := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: env, RedisURL: on.RedisURL})
	back.waitFor(t, o.Key, "succeeded")
	if n := len(sentTo(smtp, "client@client.example")); n != 1 {
		t.Fatalf("%d executions", n)
	}
}

func TestSMTPFailureIsHonest(t *testing.T) {
	cases := []struct {
		name    string
		fail    smtptest.Fail
		unknown bool
	}{
		{"recipient refused", smtptest.Fail{RejectRcpt: []string{"client@client.example"}}, false},
		{"connection dropped after the body", smtptest.Fail{DropAfterData: true}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			smtp := smtptest.Start(t, smtptest.Options{})
			srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
			o := srv.prepareSend(t, emailBody)
			link := approvalLink(t, smtp, "grace@example.com")
			smtp.SetFail(tc.fail)
			if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
				t.Fatal(st)
			}
			cur := srv.waitFor(t, o.Key, "failed")
			if cur.Error == nil || cur.Error.Code != "execution_failed" || cur.Error.OutcomeUnknown == nil || *cur.Error.OutcomeUnknown != tc.unknown {
				t.Fatalf("error %+v", cur.Error)
			}
		})
	}
}

// TestDevelopmentMode is the README's walkthrough: no configuration at all.
func TestDevelopmentMode(t *testing.T) {
	srv := startService(t, serviceOpts{})
	if !strings.Contains(srv.Stderr.String(), "DEVELOPMENT MODE") {
		t.Fatalf("no loud development notice:\n%s", srv.Stderr.String())
	}
	o := srv.prepareSend(t, `{"action":"email.send","input":{"to":["Ada <ada@client.example>"],"subject":"Your invoice","text":"Hi Ada",`+
		`"attachments":[{"name":"invoice.csv","content_type":"text/csv","content_base64":"`+base64.StdEncoding.EncodeToString([]byte("item,amount\nrenewal,1200\n"))+`"}]}}`)
	link := srv.consoleLink(t, o.Key, "you")
	if st, page := newBrowser().decide(t, link, "approve", ""); st != 200 || !strings.Contains(page, "You approved it.") {
		t.Fatalf("approve: %d", st)
	}
	srv.waitFor(t, o.Key, "succeeded")
	st, page, _ := newBrowser().do(t, "GET", srv.URL()+"/dev/mail", nil)
	if st != 200 || !strings.Contains(page, "Your invoice") || !strings.Contains(page, "ada@client.example") {
		t.Fatalf("dev mailbox: %d\n%s", st, page)
	}
	// It shows the attachment as sent: its name and, being text, its content.
	if !strings.Contains(page, "invoice.csv") || !strings.Contains(page, "renewal,1200") {
		t.Errorf("the dev mailbox does not show the attachment:\n%s", page)
	}
	// The dev mailbox holds the agent's email only, never an approval link.
	assertNoCapabilities(t, []string{link}, map[string]string{"responses": srv.Transcript.String(), "dev mailbox": page, "log": srv.Stderr.String()})
}
