package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// TestRedisClusterLoop runs the whole loop on a real Redis Cluster, two
// replicas sharing it: every script must touch one slot (a real cluster
// answers CROSSSLOT otherwise, which miniredis never does). It runs when
// REDIS_CLUSTER_URL names the cluster (.ci/run starts one), for example
// redis://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003.
func TestRedisClusterLoop(t *testing.T) {
	url := os.Getenv("REDIS_CLUSTER_URL")
	if url == "" {
		t.Skip("REDIS_CLUSTER_URL is not set")
	}
	rdb, err := store.Open(url)
	must(t, err)
	defer rdb.Close()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("REDIS_CLUSTER_URL opened a %T, not a cluster client", rdb)
	}
	must(t, cc.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		return c.FlushDB(ctx).Err()
	}))

	smtp := smtptest.Start(t, smtptest.Options{})
	env := map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}
	a := startService(t, serviceOpts{Config: loopConfig(2, "email"), Env: env, RedisURL: url})
	b := startService(t, serviceOpts{Config: loopConfig(2, "email"), Env: env, RedisURL: url})

	// Idempotent prepare on one replica, send on the other.
	body := strings.Replace(emailBody, `"action":"email.send",`, `"action":"email.send","idempotency_key":"cluster-1",`, 1)
	st, raw := a.call(t, "POST", "/v1/operations", a.APIKey, body)
	if st != 201 {
		t.Fatalf("prepare: %d %s", st, raw)
	}
	o := decode[op](t, raw)
	if st, _ := b.call(t, "POST", "/v1/operations", b.APIKey, body); st != 200 {
		t.Fatalf("idempotent prepare on the other replica: %d", st)
	}
	if st, raw := b.call(t, "POST", "/v1/operations/"+o.Key+"/send", b.APIKey, ""); st != 202 {
		t.Fatalf("send: %d %s", st, raw)
	}
	g, ad := approvalLink(t, smtp, "grace@example.com"), approvalLink(t, smtp, "ada@example.com")
	if st, _ := newBrowser().decide(t, g, "approve", ""); st != 200 {
		t.Fatalf("grace: %d", st)
	}
	if st, _ := newBrowser().decide(t, strings.Replace(ad, a.URL(), b.URL(), 1), "approve", ""); st != 200 {
		t.Fatalf("ada: %d", st)
	}
	done := a.waitFor(t, o.Key, "succeeded")
	if len(done.Approval.Approvals) != 2 || len(sentTo(smtp, "client@client.example")) != 1 {
		t.Fatalf("approvals %d, executions %d", len(done.Approval.Approvals), len(sentTo(smtp, "client@client.example")))
	}
	// Operators see every principal's operations.
	list, err := a.Store.All(context.Background(), []string{"support-agent"}, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("ops list on the cluster: %d operations, %v", len(list), err)
	}
	st, evs := a.call(t, "GET", "/v1/operations/"+o.Key+"/events", a.APIKey, "")
	if st != 200 || !strings.Contains(string(evs), `"succeeded"`) {
		t.Fatalf("events: %d %s", st, evs)
	}
}
