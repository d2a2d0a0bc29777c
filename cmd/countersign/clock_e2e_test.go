package main

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

// TestReplicaClockOffsetChangesNothing: three replicas share one Redis;
// one's own clock is 90 s ahead, another's 90 s behind (issue 20: one
// replica 90 s ahead expired windows created elsewhere 89 s early, drafts
// expired after 1.4 s, reminders fired at send, audit times disagreed).
// Every time the service uses is Redis's, so drafts prepared on either
// keep their full TTL, a window opened on the slow replica is not over
// when the fast one serves its link, no reminder fires at send, and the
// audit times of one operation touched by all three are in order and
// agree with the real time.
func TestReplicaClockOffsetChangesNothing(t *testing.T) {
	start := time.Now()
	smtp := smtptest.Start(t, smtptest.Options{})
	cfg := fmt.Sprintf(`
principals:
  - id: support-agent
    api_key_sha256: "%s"
    scopes: [email.send]
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com}
routes:
  - name: outbound email
    match: {action: email.send}
    approvers: {ids: [grace]}
    notify: [console]
    approval_ttl: 1m
    remind: [30s]
limits:
  email.send: {max_recipients: 3, allowed_domains: [client.example]}
`, testKeyHash)
	env := map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}
	honest := startService(t, serviceOpts{Config: cfg, Env: env})
	ahead := startService(t, serviceOpts{Config: cfg, Env: env, RedisURL: honest.RedisURL, SystemClock: skewedClock(90 * time.Second)})
	behind := startService(t, serviceOpts{Config: cfg, Env: env, RedisURL: honest.RedisURL, SystemClock: skewedClock(-90 * time.Second)})
	replicas := []*testService{honest, ahead, behind}
	near := func(what string, got, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < -3*time.Second || d > 3*time.Second {
			t.Errorf("%s: %s, want about %s (%s off)", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano), d)
		}
	}

	// Drafts prepared on the replicas ahead and behind: created now, kept
	// the default 15 minutes, still drafts a moment later.
	var drafts []string
	for _, s := range []*testService{ahead, behind} {
		now := time.Now()
		o := decode[struct {
			op
			CreatedAt time.Time `json:"created_at"`
			ExpiresAt time.Time `json:"expires_at"`
		}](t, mustCall(t, s, "POST", "/v1/operations", emailBody, 201))
		near("a draft's created_at", o.CreatedAt, now)
		near("a draft's expires_at", o.ExpiresAt, now.Add(15*time.Minute))
		drafts = append(drafts, o.Key)
	}
	time.Sleep(2 * time.Second)
	for _, k := range drafts {
		for _, s := range replicas {
			if got := decode[op](t, mustCall(t, s, "GET", "/v1/operations/"+k, "", 200)); got.Status != "draft" {
				t.Errorf("draft %s read through a replica 2 s after prepare: %s", k, got.Status)
			}
		}
	}

	// An approval window opened on the replica behind (1 minute), served by
	// the one ahead: open, and no reminder (due 30 s after the send) fired
	// at the send.
	sent := time.Now()
	mustCall(t, behind, "POST", "/v1/operations/"+drafts[1]+"/send", "", 202)
	o := decode[struct {
		op
		ExpiresAt time.Time `json:"expires_at"`
	}](t, mustCall(t, ahead, "GET", "/v1/operations/"+drafts[1], "", 200))
	if o.Status != "pending_approval" {
		t.Fatalf("after send, through the replica ahead: %s", o.Status)
	}
	near("the window's end", o.ExpiresAt, sent.Add(time.Minute))
	link := consoleLinkOf(t, drafts[1], "grace", replicas...)
	time.Sleep(2 * time.Second) // timers run every 250 ms on every replica
	n := 0
	for _, s := range replicas {
		n += len(s.consoleLinks(drafts[1], "grace"))
	}
	if n != 1 {
		t.Errorf("grace got %d links within 2 s of the send; the reminder is due after 30 s", n)
	}
	if st, _ := newBrowser().decide(t, onService(link, ahead), "approve", ""); st != 200 {
		t.Fatalf("grace approves through the replica 90 s ahead, a minute's window opened 2 s before on the one 90 s behind: %d", st)
	}
	honest.waitFor(t, drafts[1], "succeeded")

	// The audit: every event of the operation (prepared on behind, sent
	// there, read and decided on ahead, executed by any) at the real time,
	// in order.
	evs := decode[struct {
		Events []struct {
			Time  time.Time `json:"time"`
			Event string    `json:"event"`
		} `json:"events"`
	}](t, mustCall(t, honest, "GET", "/v1/operations/"+drafts[1]+"/events", "", 200))
	if len(evs.Events) < 4 {
		t.Fatalf("%d events", len(evs.Events))
	}
	end := time.Now()
	for i, e := range evs.Events {
		if e.Time.Before(start.Add(-2*time.Second)) || e.Time.After(end.Add(2*time.Second)) {
			t.Errorf("event %s at %s, outside the test's run (%s to %s)", e.Event, e.Time, start, end)
		}
		if i > 0 && e.Time.Before(evs.Events[i-1].Time.Add(-50*time.Millisecond)) { // each replica reads Redis's time to within half a round trip
			t.Errorf("event %s at %s, before %s at %s", e.Event, e.Time, evs.Events[i-1].Event, evs.Events[i-1].Time)
		}
	}
}

// onService points a link at another replica.
func onService(link string, s *testService) string {
	u, err := url.Parse(link)
	if err != nil {
		return link
	}
	u.Host = s.Addr
	return u.String()
}

// skewedClock is a machine clock set d off, ticking at the right rate.
func skewedClock(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}
