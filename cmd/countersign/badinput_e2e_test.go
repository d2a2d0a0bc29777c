package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// offsetClock runs at real speed and can jump forward.
type offsetClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *offsetClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *offsetClock) Add(d time.Duration) { c.mu.Lock(); c.off += d; c.mu.Unlock() }

const otherKey = "cs_other_principal_key_for_tests"

// storedOperations counts what the store holds for operations and
// idempotency keys: bad input must not change it.
func storedOperations(t *testing.T, srv *testService) int {
	t.Helper()
	c := redistest.Client(t, srv.RedisURL)
	n := 0
	// Operations, their idempotency bindings and the principals' indexes
	// (store/keys.go), in every shard.
	for _, pattern := range []string{"cs:{*}:o:*", "cs:{*}:ik:*", "cs:{*}:pi:*"} {
		keys, err := c.Keys(context.Background(), pattern).Result()
		must(t, err)
		n += len(keys)
	}
	return n
}

func TestBadInputsGetCodesAndStoreNothing(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	cfg := strings.Replace(loopConfig(1, "email"), "approvers:\n", fmt.Sprintf(`  - id: tool-bot
    api_key_sha256: "%s"
    scopes: [host.tool_call]
approvers:
`, apiKeyHash(otherKey)), 1)
	clock := &offsetClock{}
	srv := startService(t, serviceOpts{Config: cfg, Now: clock.Now, Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	key := srv.APIKey

	// Fixtures made before counting: a rejected operation and a live one.
	rejected := srv.prepareSend(t, emailBody)
	newBrowser().decide(t, approvalLink(t, smtp, "grace@example.com"), "reject", "no")
	srv.waitFor(t, rejected.Key, "rejected")
	st, b := srv.call(t, "POST", "/v1/operations", key, `{"action":"email.send","idempotency_key":"fixed-1","input":{"to":["a@client.example"],"subject":"s","text":"t"}}`)
	if st != 201 {
		t.Fatalf("fixture: %d %s", st, b)
	}
	live := decode[op](t, b)

	email := func(input string) string { return `{"action":"email.send","input":` + input + `}` }
	big := `{"action":"email.send","input":{"to":["a@client.example"],"subject":"s","text":"` + strings.Repeat("x", 300<<10) + `"}}`
	cases := []struct {
		name, method, path, key, body string
		status                        int
		code                          string
		rule                          string
	}{
		{"malformed JSON", "POST", "/v1/operations", key, `{"action":`, 400, "invalid_input", ""},
		{"empty body", "POST", "/v1/operations", key, ``, 400, "invalid_input", ""},
		{"body is an array", "POST", "/v1/operations", key, `[]`, 400, "invalid_input", ""},
		{"trailing data", "POST", "/v1/operations", key, email(`{"to":["a@client.example"],"subject":"s","text":"t"}`) + `{}`, 400, "invalid_input", ""},
		{"unknown top-level field", "POST", "/v1/operations", key, `{"action":"email.send","input":{},"approve":true}`, 400, "invalid_input", ""},
		{"missing action", "POST", "/v1/operations", key, `{"input":{}}`, 400, "invalid_input", ""},
		{"unknown action", "POST", "/v1/operations", key, `{"action":"wire.transfer","input":{}}`, 400, "unknown_action", ""},
		{"missing input", "POST", "/v1/operations", key, `{"action":"email.send"}`, 400, "invalid_input", ""},
		{"input is a string", "POST", "/v1/operations", key, email(`"send it"`), 400, "invalid_input", ""},
		{"no recipients", "POST", "/v1/operations", key, email(`{"to":[],"subject":"s","text":"t"}`), 400, "invalid_input", ""},
		{"bad address", "POST", "/v1/operations", key, email(`{"to":["not an address"],"subject":"s","text":"t"}`), 400, "invalid_input", ""},
		{"header injection in subject", "POST", "/v1/operations", key, email(`{"to":["a@client.example"],"subject":"hi\r\nBcc: x@evil.example","text":"t"}`), 400, "invalid_input", ""},
		{"missing text", "POST", "/v1/operations", key, email(`{"to":["a@client.example"],"subject":"s"}`), 400, "invalid_input", ""},
		{"unknown input field", "POST", "/v1/operations", key, email(`{"to":["a@client.example"],"subject":"s","text":"t","priority":"high"}`), 400, "invalid_input", ""},
		{"too many recipients", "POST", "/v1/operations", key, email(`{"to":["a@client.example","b@client.example","c@client.example","d@client.example"],"subject":"s","text":"t"}`), 422, "policy_denied", "max_recipients"},
		{"disallowed domain", "POST", "/v1/operations", key, email(`{"to":["someone@gmail.example"],"subject":"s","text":"t"}`), 422, "policy_denied", "allowed_domains"},
		{"oversized body", "POST", "/v1/operations", key, big, 413, "payload_too_large", ""},
		{"missing API key", "POST", "/v1/operations", "", email(`{}`), 401, "unauthenticated", ""},
		{"unknown API key", "POST", "/v1/operations", "cs_nope", email(`{}`), 401, "unauthenticated", ""},
		{"principal without the scope", "POST", "/v1/operations", otherKey, email(`{"to":["a@client.example"],"subject":"s","text":"t"}`), 403, "insufficient_scope", ""},
		{"idempotency key reused for another request", "POST", "/v1/operations", key, `{"action":"email.send","idempotency_key":"fixed-1","input":{"to":["b@client.example"],"subject":"s","text":"t"}}`, 422, "idempotency_key_reused", ""},
		{"ill-formed idempotency key", "POST", "/v1/operations", key, `{"action":"email.send","idempotency_key":"has spaces","input":{"to":["a@client.example"],"subject":"s","text":"t"}}`, 400, "invalid_input", ""},
		{"ill-formed operation key", "GET", "/v1/operations/op_1", key, "", 404, "not_found", ""},
		{"unknown operation key", "GET", "/v1/operations/op_aaaaaaaaaaaaaaaaaaaaaaaaaa", key, "", 404, "not_found", ""},
		{"another principal's operation", "GET", "/v1/operations/" + live.Key, otherKey, "", 404, "not_found", ""},
		{"send after rejection", "POST", "/v1/operations/" + rejected.Key + "/send", key, "", 409, "invalid_state", ""},
		{"cancel after rejection", "POST", "/v1/operations/" + rejected.Key + "/cancel", key, "", 409, "invalid_state", ""},
		{"undo of an email", "POST", "/v1/operations/" + rejected.Key + "/undo", key, "", 409, "invalid_state", ""},
		{"wait out of range", "GET", "/v1/operations/" + live.Key + "?wait=31", key, "", 400, "invalid_input", ""},
		{"wait not a number", "GET", "/v1/operations/" + live.Key + "?wait=soon", key, "", 400, "invalid_input", ""},
		{"unknown status filter", "GET", "/v1/operations?status=done", key, "", 400, "invalid_input", ""},
		{"unknown endpoint", "POST", "/v1/operations/" + live.Key + "/approve", key, "", 404, "not_found", ""},
	}
	before := storedOperations(t, srv)
	if before < 2 {
		t.Fatalf("the fixtures' operations are not found (%d keys): the count would see nothing", before)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, b := srv.call(t, tc.method, tc.path, tc.key, tc.body)
			e := decode[apiError](t, b)
			if st != tc.status || e.Error.Code != tc.code {
				t.Fatalf("got %d %s, want %d %s: %s", st, e.Error.Code, tc.status, tc.code, b)
			}
			if e.Error.Message == "" {
				t.Error("no message")
			}
			if tc.rule != "" && e.Error.Details["rule"] != tc.rule {
				t.Errorf("rule %v, want %s", e.Error.Details["rule"], tc.rule)
			}
			if tc.code == "invalid_input" && strings.Contains(tc.name, "address") && e.Error.Details["fields"] == nil {
				t.Errorf("no details.fields: %s", b)
			}
		})
	}
	if after := storedOperations(t, srv); after != before {
		t.Fatalf("bad input stored something: %d keys before, %d after", before, after)
	}
}

func TestApprovalPageRefusals(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	clock := &offsetClock{}
	srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Now: clock.Now, Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	o := srv.prepareSend(t, emailBody)
	link := approvalLink(t, smtp, "grace@example.com")
	token := link[strings.LastIndex(link, "/a/")+3:]
	parts := strings.Split(token, ".")
	base := srv.URL() + "/a/"

	b := newBrowser()
	st, page, _ := b.do(t, "GET", link, nil)
	if st != 200 {
		t.Fatal(st)
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]
	post := func(br *browser, target string, form url.Values) int {
		st, _, _ := br.do(t, "POST", target, form)
		return st
	}
	flip := func(s string) string {
		if s[len(s)-1] == 'A' {
			return s[:len(s)-1] + "B"
		}
		return s[:len(s)-1] + "A"
	}
	cases := []struct {
		name   string
		do     func() int
		status int
	}{
		{"tampered signature", func() int { st, _, _ := b.do(t, "GET", base+parts[0]+"."+parts[1]+"."+flip(parts[2]), nil); return st }, 404},
		{"tampered claims", func() int { st, _, _ := b.do(t, "GET", base+parts[0]+"."+flip(parts[1])+"."+parts[2], nil); return st }, 404},
		{"unknown key id", func() int { st, _, _ := b.do(t, "GET", base+"k9."+parts[1]+"."+parts[2], nil); return st }, 404},
		{"garbage", func() int { st, _, _ := b.do(t, "GET", base+"hello", nil); return st }, 404},
		{"POST without CSRF token", func() int { return post(b, link, url.Values{"decision": {"approve"}}) }, 403},
		{"POST with a wrong CSRF token", func() int { return post(b, link, url.Values{"_csrf": {"x" + csrf}, "decision": {"approve"}}) }, 403},
		{"POST without the cookie", func() int { return post(newBrowser(), link, url.Values{"_csrf": {csrf}, "decision": {"approve"}}) }, 403},
		{"POST without a decision", func() int { return post(b, link, url.Values{"_csrf": {csrf}}) }, 400},
		{"POST from another site", func() int {
			req := url.Values{"_csrf": {csrf}, "decision": {"approve"}}
			return postWithOrigin(t, b, link, req, "https://evil.example")
		}, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.do(); got != tc.status {
				t.Fatalf("status %d, want %d", got, tc.status)
			}
		})
	}
	// None of that used anything up.
	if cur := srv.waitFor(t, o.Key, "pending_approval"); len(cur.Approval.Approvals) != 0 {
		t.Fatal("a refused attempt decided")
	}

	// The window ends: the link explains with 410 and decides nothing.
	clock.Add(2 * time.Hour)
	if st, page, _ := b.do(t, "GET", link, nil); st != 410 || !strings.Contains(page, "expired") {
		t.Fatalf("expired link: %d", st)
	}
	if st := post(b, link, url.Values{"_csrf": {csrf}, "decision": {"approve"}}); st != 410 {
		t.Fatalf("POST on expired link: %d", st)
	}
	srv.waitFor(t, o.Key, "expired")

	// Many failures from one client: its invalid links get 429, and its
	// valid link is still answered as it stands (a signed link is never
	// locked out).
	for range 30 {
		b.do(t, "GET", base+"nonsense", nil)
	}
	st, _, h := b.do(t, "GET", base+"more-nonsense", nil)
	if st != 429 || h.Get("Retry-After") == "" {
		t.Fatalf("after many failures: %d (Retry-After %q)", st, h.Get("Retry-After"))
	}
	if st, _, _ := b.do(t, "GET", link, nil); st != 410 {
		t.Fatalf("the valid link after many failures: %d, want 410 (expired, shown)", st)
	}
}

func postWithOrigin(t *testing.T, b *browser, link string, form url.Values, origin string) int {
	t.Helper()
	req, err := newFormRequest(link, form)
	must(t, err)
	req.Header.Set("Origin", origin)
	resp, err := b.c.Do(req)
	must(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
