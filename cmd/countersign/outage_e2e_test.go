package main

import (
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/redistest"
)

// cutProxy forwards TCP to a Redis and can cut it: down closes every
// connection and refuses new ones; up accepts again on the same address.
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

func (p *cutProxy) up() {
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
