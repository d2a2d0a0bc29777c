package main

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
)

// cutProxy forwards TCP to a Redis and can cut it: down closes every
// connection and refuses new ones; stall accepts connections and never
// answers (as a paused Redis does); up forwards again on the same address.
type cutProxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	p := &cutProxy{t: t, target: target}
	p.up()
	t.Cleanup(p.down)
	return p
}

func (p *cutProxy) up() { p.listen(true) }

func (p *cutProxy) stall() { p.listen(false) }

func (p *cutProxy) listen(forward bool) {
	p.down()
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	must(p.t, err)
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !forward {
				p.mu.Lock()
				p.conns = append(p.conns, c) // held open, never answered
				p.mu.Unlock()
				continue
			}
			r, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, r)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(r, c); r.Close() }()
			go func() { _, _ = io.Copy(c, r); c.Close() }()
		}
	}()
}

func (p *cutProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestRedisOutage: while Redis is unreachable every request gets 503
// unavailable (never a false success), and once it is back the work that
// was acknowledged before goes on by itself.
func TestRedisOutage(t *testing.T) {
	redisURL, err := url.Parse(redistest.Start(t).URL)
	must(t, err)
	proxy := newCutProxy(t, redisURL.Host)
	redisURL.Host = proxy.addr
	cfg := strings.Replace(loopConfig(1, "console"), "  email.send: {max_recipients: 3, allowed_domains: [client.example]}\n", "", 1)
	cfg = strings.Replace(cfg, "limits:\n", "", 1)
	srv := startService(t, serviceOpts{Config: cfg, RedisURL: redisURL.String(), Env: map[string]string{"COUNTERSIGN_SMTP_URL": "smtp://127.0.0.1:1?tls=none"}})
	body := `{"action":"email.send","input":{"to":["client@client.example"],"subject":"s","text":"t"}}`
	st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, body)
	if st != 201 {
		t.Fatalf("prepare: %d %s", st, b)
	}
	before := decode[op](t, b)

	proxy.down()
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/operations", body},
		{"GET", "/v1/operations/" + before.Key, ""},
		{"POST", "/v1/operations/" + before.Key + "/send", ""},
	} {
		st, b := srv.call(t, c.method, c.path, srv.APIKey, c.body)
		if e := decode[apiError](t, b); st != 503 || e.Error.Code != "unavailable" || strings.Contains(string(b), proxy.addr) {
			t.Errorf("%s %s with Redis down: %d %s", c.method, c.path, st, b)
		}
	}
	if st, _ := srv.call(t, "GET", "/readyz", "", ""); st != 503 {
		t.Errorf("readyz with Redis down: %d", st)
	}
	if st, _ := srv.call(t, "GET", "/healthz", "", ""); st != 200 {
		t.Errorf("healthz with Redis down: %d", st)
	}

	proxy.up()
	deadline := time.Now().Add(10 * time.Second) // the client redials about once a second
	for st, _ := srv.call(t, "GET", "/readyz", "", ""); st != 200; st, _ = srv.call(t, "GET", "/readyz", "", "") {
		if time.Now().After(deadline) {
			t.Fatal("not ready 10 s after Redis came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The draft acknowledged before the outage is intact: send it now, cut
	// Redis again right away, and the notification still goes out once it
	// is back, without anyone calling anything.
	if st, b := srv.call(t, "POST", "/v1/operations/"+before.Key+"/send", srv.APIKey, ""); st != 202 {
		t.Fatalf("send after the outage: %d %s", st, b)
	}
	proxy.down()
	time.Sleep(500 * time.Millisecond)
	proxy.up()
	link := srv.consoleLink(t, before.Key, "grace")
	if st, _ := newBrowser().decide(t, link, "reject", "after the outage"); st != 200 {
		t.Fatalf("decide after the outage: %d", st)
	}
	if o := srv.waitFor(t, before.Key, "rejected"); o.Approval.Rejection.Reason != "after the outage" {
		t.Fatalf("%+v", o.Approval.Rejection)
	}
}

// TestRedisStallAnswersInTime: with Redis accepting connections but never
// answering (paused), the approval page, the REST API and MCP each answer
// 503 unavailable within 5 s, and no log line or answer carries the link
// (the leak scan covers the outage). Once Redis answers again, the same
// link works.
func TestRedisStallAnswersInTime(t *testing.T) {
	redisURL, err := url.Parse(redistest.Start(t).URL)
	must(t, err)
	proxy := newCutProxy(t, redisURL.Host)
	redisURL.Host = proxy.addr
	cfg := strings.Replace(loopConfig(1, "console"), "  email.send: {max_recipients: 3, allowed_domains: [client.example]}\n", "", 1)
	cfg = strings.Replace(cfg, "limits:\n", "", 1)
	srv := startService(t, serviceOpts{Config: cfg, RedisURL: redisURL.String(), Env: map[string]string{"COUNTERSIGN_SMTP_URL": "smtp://127.0.0.1:1?tls=none"}})
	o := srv.prepareSend(t, `{"action":"email.send","input":{"to":["client@client.example"],"subject":"s","text":"t"}}`)
	link := srv.consoleLink(t, o.Key, "grace")
	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	b := newBrowser()
	if st, _, _ := b.do(t, "GET", link, nil); st != 200 {
		t.Fatalf("page before the stall: %d", st)
	}

	proxy.stall()
	timed := func(name string, f func() (ok bool, detail string)) {
		t.Helper()
		start := time.Now()
		ok, detail := f()
		took := time.Since(start)
		t.Logf("%s with Redis stalled: %s after %s", name, detail, took.Round(time.Millisecond))
		if !ok || took > 5*time.Second {
			t.Errorf("%s: %s after %s, want unavailable within 5 s", name, detail, took)
		}
	}
	timed("page", func() (bool, string) {
		st, page, h := b.do(t, "GET", link, nil)
		return st == 503 && h.Get("X-Frame-Options") == "DENY" && !strings.Contains(page, "goroutine"), fmt.Sprint(st)
	})
	timed("page POST", func() (bool, string) {
		st, _, _ := b.do(t, "POST", link, url.Values{"_csrf": {"x"}, "decision": {"approve"}})
		return st == 503, fmt.Sprint(st)
	})
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/operations/" + o.Key, ""},
		{"GET", "/v1/operations/" + o.Key + "?wait=2", ""},
		{"POST", "/v1/operations", `{"action":"email.send","input":{"to":["client@client.example"],"subject":"s","text":"t"}}`},
	} {
		timed(c.method+" "+c.path, func() (bool, string) {
			st, b := srv.call(t, c.method, c.path, srv.APIKey, c.body)
			return st == 503 && decode[apiError](t, b).Error.Code == "unavailable", fmt.Sprintf("%d %s", st, b)
		})
	}
	for _, c := range []struct {
		tool string
		args any
	}{
		{"get_operation_status", map[string]any{"operation_key": o.Key}},
		{"prepare_email", map[string]any{"to": []string{"client@client.example"}, "subject": "s", "text": "t"}},
	} {
		timed("MCP "+c.tool, func() (bool, string) {
			out := mcpCall(t, cs, c.tool, c.args)
			if out.err == nil {
				return false, "no error"
			}
			return out.err.Code == approval.CodeUnavailable, string(out.err.Code)
		})
	}
	if !strings.Contains(srv.Stderr.String(), `"path":"/a/…redacted"`) {
		t.Errorf("the page's outage was not logged with a redacted path")
	}
	assertNoCapabilities(t, []string{link}, map[string]string{"responses": srv.Transcript.String(), "log": srv.Stderr.String()})

	proxy.up()
	deadline := time.Now().Add(10 * time.Second)
	for st, _ := srv.call(t, "GET", "/readyz", "", ""); st != 200; st, _ = srv.call(t, "GET", "/readyz", "", "") {
		if time.Now().After(deadline) {
			t.Fatal("not ready 10 s after Redis came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, _ := b.decide(t, link, "approve", ""); st != 200 {
		t.Fatalf("decide after the stall: %d", st)
	}
}
