package web_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/testkit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
	"github.com/gofiber/fiber/v2"
)

// TestPanicAnswers500AndLogsNoLink: a handler under /a/ that panics with
// the link in its panic value answers a plain 500 page with the page
// headers, the process goes on, and neither the answer nor the log (a
// plain JSON handler given to web: web redacts on its own) carries the
// link.
func TestPanicAnswers500AndLogsNoLink(t *testing.T) {
	boom := web.Mount{Method: "GET", Path: "/a/:token/boom", Handler: func(c *fiber.Ctx) error {
		panic(fmt.Sprintf("cannot render %s%s", pagePublicURL+"/a/", c.Params("token")))
	}}
	e := newPageEnv(t, pageOpts{mounts: []web.Mount{boom}})
	_, tokens := e.pending("Retro")
	c := newClient("")
	r := c.do(t, "GET", e.base+"/a/"+tokens[0]+"/boom", nil, nil)
	if r.status != http.StatusInternalServerError {
		t.Fatalf("panic: %d", r.status)
	}
	assertPageHeaders(t, "panic page", r.header)
	if !strings.Contains(e.log.String(), "panic in handler") || !strings.Contains(e.log.String(), "cannot render") {
		t.Fatalf("the panic was not logged:\n%s", e.log.String())
	}
	if r2, _ := c.open(t, e, tokens[0]); r2.status != http.StatusOK {
		t.Fatalf("after the panic: %d", r2.status)
	}
	testkit.AssertNoLinkSecrets(t, testkit.LinkSecrets(pagePublicURL+"/a/"+tokens[0]),
		map[string]string{"panic page": r.body, "log": e.log.String()})
}

// stalledRedis accepts connections and never answers, as a paused Redis
// does (the kernel completes the handshake; nothing comes back).
func stalledRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "redis://" + ln.Addr().String()
}

// TestStoreOutageAnswers503InTime: with the store stalled, a valid-looking
// link, a REST call and the health check answer 503 within 5 s (bounded
// client timeouts and the request deadline), on a page with the page
// headers, and the error log line names the path without the link.
func TestStoreOutageAnswers503InTime(t *testing.T) {
	rdb, err := store.Open(stalledRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	st := store.New(rdb, log)
	t.Cleanup(func() { _ = st.Close(); _ = rdb.Close() })
	const apiKey = "cs_test_outage_key"
	sum := sha256.Sum256([]byte(apiKey))
	agent := &approval.Principal{ID: "agent", Scopes: []string{"*"}, KeyHash: hex.EncodeToString(sum[:])}
	links := approval.RandomKeyring()
	svc, err := approval.NewService(approval.Config{Store: st, Links: links, PublicURL: pagePublicURL, Logger: log,
		Policy: &approval.Policy{Principals: []*approval.Principal{agent}, Approvers: []*approval.Approver{{ID: "grace"}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{Service: svc, Limiter: st, Ready: st.Ping, PublicURL: pagePublicURL, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	base := testkit.Serve(t, srv.App().Listener, srv.Shutdown)
	token := links.Sign(approval.NewLinkClaims(approval.NewOperationKey(), "grace", "email", time.Now().Add(time.Hour)), "sha256:00")
	c := newClient("")
	for _, req := range []struct {
		name, method, path string
		hdr                map[string]string
	}{
		{"page", "GET", "/a/" + token, nil},
		{"page POST", "POST", "/a/" + token, nil},
		{"REST get", "GET", "/v1/operations/" + approval.NewOperationKey(), map[string]string{"Authorization": "Bearer " + apiKey}},
		{"REST prepare", "POST", "/v1/operations", map[string]string{"Authorization": "Bearer " + apiKey}},
		{"readyz", "GET", "/readyz", nil},
	} {
		start := time.Now()
		r := c.do(t, req.method, base+req.path, nil, req.hdr)
		took := time.Since(start)
		t.Logf("%s with the store stalled: %d after %s", req.name, r.status, took.Round(time.Millisecond))
		if r.status != http.StatusServiceUnavailable || took > 5*time.Second {
			t.Errorf("%s: %d after %s, want 503 within 5 s", req.name, r.status, took)
		}
		if strings.HasPrefix(req.path, "/a/") {
			assertPageHeaders(t, req.name, r.header)
		} else if req.path != "/readyz" && !strings.Contains(r.body, `"unavailable"`) {
			t.Errorf("%s: %s", req.name, r.body)
		}
		testkit.AssertNoLinkSecrets(t, testkit.LinkSecrets(token), map[string]string{req.name: r.body})
	}
	if !strings.Contains(logs.String(), `"path":"/a/…redacted"`) {
		t.Errorf("the outage was not logged with a redacted path:\n%s", logs.String())
	}
	testkit.AssertNoLinkSecrets(t, testkit.LinkSecrets(token), map[string]string{"log": logs.String()})
}
