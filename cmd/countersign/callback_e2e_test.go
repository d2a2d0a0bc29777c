package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

// hookSecret is the status webhook's secret in these tests.
const hookSecret = "whsec_test_0123456789abcdef"

func callbackConfig(url string) string {
	return fmt.Sprintf(`
principals:
  - id: support-agent
    api_key_sha256: "%s"
    scopes: [email.send]
    callback_url: "%s"
    callback_secret: "${HOOK_SECRET}"
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com}
routes:
  - {match: {action: email.send}, approvers: {ids: [grace]}, notify: [console]}
`, testKeyHash, url)
}

// hookEvent is what the receiver keeps of one POST.
type hookEvent struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Key      string `json:"operation_key"`
	Status   string `json:"status"`
	Previous string `json:"previous_status"`
	Sequence int    `json:"sequence"`
}

// hookReceiver is an agent's webhook endpoint: it verifies every POST's
// signature and freshness as the docs tell receivers to, refuses what does
// not verify, and records the events in arrival order.
type hookReceiver struct {
	mu       sync.Mutex
	events   []hookEvent
	bad      []string
	arrivals int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ts := r.Header.Get("X-Countersign-Timestamp")
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	sec, _ := strconv.ParseInt(ts, 10, 64)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.arrivals++
	if !hmac.Equal([]byte(r.Header.Get("X-Countersign-Signature")), []byte(want)) || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		h.bad = append(h.bad, "signature or timestamp: "+r.Header.Get("X-Countersign-Signature"))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if err := apiCheck.V.CheckSchema("StatusEvent", body); err != nil {
		h.bad = append(h.bad, "not a StatusEvent of web/openapi.json: "+err.Error())
	}
	var ev hookEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID != r.Header.Get("X-Countersign-Event-Id") {
		h.bad = append(h.bad, "body: "+string(body))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.events = append(h.events, ev)
	w.WriteHeader(http.StatusNoContent)
}

// of returns the distinct events of one operation in first-arrival order,
// and how many arrived twice (at least once allows it; the id tells).
func (h *hookReceiver) of(key string) (evs []hookEvent, dups int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range h.events {
		if e.Key != key {
			continue
		}
		if seen[e.ID] {
			dups++
			continue
		}
		seen[e.ID] = true
		evs = append(evs, e)
	}
	return evs, dups
}

// waitEvents waits until the receiver has n distinct events of key.
func (h *hookReceiver) waitEvents(t *testing.T, key string, n int, within time.Duration) []hookEvent {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		evs, _ := h.of(key)
		if len(evs) >= n {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook got %d events of %s in %s, want %d: %+v", len(evs), key, within, n, evs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func serveHooks(t *testing.T, ln net.Listener, h *hookReceiver) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

func checkChanges(t *testing.T, evs []hookEvent, key string, statuses ...string) {
	t.Helper()
	if len(evs) != len(statuses) {
		t.Fatalf("events %+v, want statuses %v", evs, statuses)
	}
	prev := ""
	for i, e := range evs {
		if e.Status != statuses[i] || e.Sequence != i+1 || e.ID != key+"."+strconv.Itoa(i+1) || e.Type != "operation.status_changed" ||
			(i > 0 && e.Previous != prev) {
			t.Errorf("event %d = %+v, want %s after %s", i+1, e, statuses[i], prev)
		}
		prev = e.Status
	}
}

func TestStatusWebhookDeliversEveryChangeInOrder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	hooks := &hookReceiver{}
	serveHooks(t, ln, hooks)
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: callbackConfig("http://" + ln.Addr().String() + "/hooks/countersign"),
		Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL(), "HOOK_SECRET": hookSecret}})

	o := srv.prepareSend(t, emailBody)
	link := srv.consoleLink(t, o.Key, "grace")
	hooks.waitEvents(t, o.Key, 1, 10*time.Second) // pending_approval, before anyone decided
	if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	srv.waitFor(t, o.Key, "succeeded")
	evs := hooks.waitEvents(t, o.Key, 4, 10*time.Second)
	checkChanges(t, evs, o.Key, "pending_approval", "approved", "executing", "succeeded")
	if evs[0].Previous != "draft" {
		t.Errorf("the first change comes from %q, want draft", evs[0].Previous)
	}

	// A draft the agent cancels is heard too (no worker is woken by a
	// draft's end by itself).
	st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, emailBody)
	if st != 201 {
		t.Fatalf("prepare: %d %s", st, b)
	}
	d := decode[op](t, b)
	if st, b := srv.call(t, "POST", "/v1/operations/"+d.Key+"/cancel", srv.APIKey, ""); st != 200 {
		t.Fatalf("cancel: %d %s", st, b)
	}
	checkChanges(t, hooks.waitEvents(t, d.Key, 1, 10*time.Second), d.Key, "canceled")

	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if len(hooks.bad) > 0 {
		t.Fatalf("posts that did not verify: %v", hooks.bad)
	}
	if strings.Contains(srv.Stderr.String(), hookSecret) {
		t.Fatal("the webhook secret is in the log")
	}
}

func TestStatusWebhookRetriesUntilTheReceiverIsUp(t *testing.T) {
	// The receiver's address, with nobody listening yet: connections are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	must(t, ln.Close())
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: callbackConfig("http://" + addr + "/hooks/countersign?token=url-token-not-for-logs"),
		Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL(), "HOOK_SECRET": hookSecret}})

	o := srv.prepareSend(t, emailBody)
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(srv.Stderr.String(), "status webhook failed; will retry") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no failed attempts logged:\n%s", srv.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Meanwhile the operation moves on; the webhook is behind.
	if st, b := srv.call(t, "POST", "/v1/operations/"+o.Key+"/cancel", srv.APIKey, ""); st != 200 {
		t.Fatalf("cancel: %d %s", st, b)
	}

	// The receiver comes up on its address: the retries deliver, in order.
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the receiver's port was taken meanwhile: %v", err)
	}
	hooks := &hookReceiver{}
	up := time.Now()
	serveHooks(t, ln, hooks)
	checkChanges(t, hooks.waitEvents(t, o.Key, 2, 20*time.Second), o.Key, "pending_approval", "canceled")
	t.Logf("delivered %s after the receiver came up", time.Since(up).Round(10*time.Millisecond))

	hooks.mu.Lock()
	if len(hooks.bad) > 0 {
		t.Errorf("posts that did not verify: %v", hooks.bad)
	}
	hooks.mu.Unlock()
	log := srv.Stderr.String()
	for _, secret := range []string{hookSecret, "url-token-not-for-logs"} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
	// The receiver has the event before the service has its answer and
	// counts the delivery: read the counters until they settle.
	var st int
	var metrics []byte
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, metrics = srv.call(t, "GET", "/metrics", "", "")
		if strings.Contains(string(metrics), `countersign_status_webhooks_total{outcome="delivered"} 2`) || time.Now().After(end) {
			break
		}
	}
	if st != 200 || !strings.Contains(string(metrics), `countersign_status_webhooks_total{outcome="failed"}`) ||
		!strings.Contains(string(metrics), `countersign_status_webhooks_total{outcome="delivered"} 2`) {
		t.Errorf("metrics:\n%s", metrics)
	}
}
