package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/redis/go-redis/v9"
)

// TestClusterFailoverKeepsServing: a Redis Cluster of three masters, each
// with a replica, serves two replicas of countersign; then every master is
// failed over (CLUSTER FAILOVER on each replica, so every shard's slot
// moves to another process). Without a restart, the service keeps
// preparing, notifying, deciding and executing, and long-polls keep
// waking at once on a change: one that waited across the failover, and
// one started after it. Skips without redis-server and redis-cli.
func TestClusterFailoverKeepsServing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six redis-server processes")
	}
	cluster := redistest.StartCluster(t, 3, 1)
	smtp := smtptest.Start(t, smtptest.Options{})
	env := map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}
	a := startService(t, serviceOpts{Config: loopConfig(1, "console"), Env: env, RedisURL: cluster.URL()})
	b := startService(t, serviceOpts{Config: loopConfig(1, "console"), Env: env, RedisURL: cluster.URL()})
	n := 0
	body := func() string {
		n++
		return strings.Replace(emailBody, "Your invoice", fmt.Sprintf("Your invoice %d", n), 1)
	}
	loop := func(stage string) {
		t.Helper()
		o := a.prepareSend(t, body())
		link := consoleLinkOf(t, o.Key, "grace", a, b)
		if st, _ := newBrowser().decide(t, strings.Replace(link, a.URL(), b.URL(), 1), "approve", ""); st != 200 {
			t.Fatalf("%s: approve: %d", stage, st)
		}
		b.waitFor(t, o.Key, "succeeded")
	}
	loop("before the failover")

	// An operation awaiting its approver, and an agent long-polling it on
	// b, across the failover.
	waiting := a.prepareSend(t, body())
	link := consoleLinkOf(t, waiting.Key, "grace", a, b)
	b.waitFor(t, waiting.Key, "pending_approval")
	time.Sleep(300 * time.Millisecond) // let the notification's own change pass
	woke := longPoll(t, b, waiting.Key)

	before := cluster.Masters()
	for _, r := range cluster.Replicas() {
		cluster.Failover(r)
	}
	cluster.WaitHealthy()
	after := cluster.Masters()
	for i := 0; len(after) != 3 && i < 100; i++ { // the old masters learn that they are replicas now
		time.Sleep(100 * time.Millisecond)
		after = cluster.Masters()
	}
	for _, m := range after {
		for _, old := range before {
			if m == old {
				t.Fatalf("master %s did not fail over (masters before %v, now %v)", m.Addr(), addrs(before), addrs(after))
			}
		}
	}
	t.Logf("failed over: masters %v → %v", addrs(before), addrs(after))

	decided := time.Now()
	if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
		t.Fatalf("approve after the failover: %d", st)
	}
	select {
	case r := <-woke:
		if r.status == "pending_approval" {
			t.Fatalf("the long-poll across the failover returned unchanged after %s", r.took)
		}
		t.Logf("the long-poll across the failover woke %s after the decision (%s)", time.Since(decided).Round(time.Millisecond), r.status)
		if d := time.Since(decided); d > 3*time.Second {
			t.Errorf("the long-poll across the failover woke %s after the decision: the change notification was lost", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the long-poll across the failover never woke")
	}
	a.waitFor(t, waiting.Key, "succeeded")

	// After the failover: the whole loop, and a fresh long-poll.
	loop("after the failover")
	o := a.prepareSend(t, body())
	link = consoleLinkOf(t, o.Key, "grace", a, b)
	b.waitFor(t, o.Key, "pending_approval")
	time.Sleep(300 * time.Millisecond)
	woke = longPoll(t, a, o.Key)
	time.Sleep(200 * time.Millisecond) // it is waiting
	decided = time.Now()
	if st, _ := newBrowser().decide(t, strings.Replace(link, a.URL(), b.URL(), 1), "reject", "after failover"); st != 200 {
		t.Fatalf("reject: %d", st)
	}
	select {
	case r := <-woke:
		if d := time.Since(decided); r.status != "rejected" || d > 3*time.Second {
			t.Fatalf("the long-poll after the failover: %s after %s", r.status, d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the long-poll after the failover never woke")
	}
	if got := len(sentTo(smtp, "client@client.example")); got != 3 {
		t.Fatalf("%d emails executed, want 3 (one per approved operation)", got)
	}
}

type pollResult struct {
	status string
	took   time.Duration
}

// longPoll starts GET ?wait=25 on s and reports what it returned.
func longPoll(t *testing.T, s *testService, key string) <-chan pollResult {
	ch := make(chan pollResult, 1)
	start := time.Now()
	go func() {
		st, raw := s.call(t, "GET", "/v1/operations/"+key+"?wait=25", s.APIKey, "")
		if st != 200 {
			ch <- pollResult{status: fmt.Sprintf("HTTP %d", st), took: time.Since(start)}
			return
		}
		var o op
		_ = jsonUnmarshalOp(raw, &o)
		ch <- pollResult{status: o.Status, took: time.Since(start)}
	}()
	return ch
}

func addrs(ps []*redistest.Process) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Addr())
	}
	return out
}

func jsonUnmarshalOp(raw []byte, o *op) error { return json.Unmarshal(raw, o) }

// TestClusterMasterKilled: the master holding the agent's shard is SIGKILLed; its
// replica is promoted once the other masters agree it failed (the
// cluster's node timeout, 2 s here). The service, not restarted, serves
// again on every shard: loops complete and long-polls wake at once.
func TestClusterMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six redis-server processes")
	}
	cluster := redistest.StartCluster(t, 3, 1)
	smtp := smtptest.Start(t, smtptest.Options{})
	env := map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}
	a := startService(t, serviceOpts{Config: loopConfig(1, "console"), Env: env, RedisURL: cluster.URL()})
	n := 0
	var last string
	loop := func(stage string) time.Duration {
		t.Helper()
		n++
		o := a.prepareSend(t, strings.Replace(emailBody, "Your invoice", fmt.Sprintf("Your invoice %d", n), 1))
		link := consoleLinkOf(t, o.Key, "grace", a)
		a.waitFor(t, o.Key, "pending_approval")
		time.Sleep(300 * time.Millisecond)
		woke := longPoll(t, a, o.Key)
		time.Sleep(200 * time.Millisecond)
		decided := time.Now()
		if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
			t.Fatalf("%s: approve: %d", stage, st)
		}
		var took time.Duration
		select {
		case r := <-woke:
			took = time.Since(decided)
			if r.status == "pending_approval" || took > 3*time.Second {
				t.Errorf("%s: the long-poll returned %s %s after the decision", stage, r.status, took)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the long-poll never woke", stage)
		}
		a.waitFor(t, o.Key, "succeeded")
		last = o.Key
		return took
	}
	loop("before the kill")

	// The victim is the master that holds the agent's shard (its
	// operations, quotas and queue).
	var victim *redistest.Process
	for _, m := range cluster.Masters() {
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		keys, _ := c.Keys(context.Background(), "cs:*:o:"+last).Result()
		c.Close()
		if len(keys) > 0 {
			victim = m
		}
	}
	if victim == nil {
		t.Fatal("no master holds the operation")
	}
	victim.Kill()
	killed := time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for len(cluster.Masters()) < 3 { // its replica takes over
		if time.Now().After(deadline) {
			t.Fatal("no replica was promoted")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("a replica took over %s after the kill", time.Since(killed).Round(100*time.Millisecond))

	// Every principal's shard: the loops keep completing (the first may
	// meet 503 while the client learns the new master; prepareSend fails
	// the test on that, so wait until a prepare answers).
	deadline = time.Now().Add(30 * time.Second)
	for {
		st, _ := a.call(t, "GET", "/v1/operations", a.APIKey, "")
		if st == 200 {
			break
		}
		if time.Now().After(deadline) {
			log := a.Stderr.String()
			t.Fatalf("the service still answers %d 30 s after the failover; log tail:\n%s", st, log[max(0, len(log)-3000):])
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("serving again %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	for i := range 3 {
		t.Logf("loop %d after the kill: long-poll woke %s after the decision", i+1, loop("after the kill").Round(time.Millisecond))
	}
	if got := len(sentTo(smtp, "client@client.example")); got != 4 {
		t.Fatalf("%d emails executed, want 4", got)
	}
}
