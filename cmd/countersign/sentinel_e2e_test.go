package main

import (
	"context"
	"os"
	"testing"

	"github.com/countersign/countersign/store"
)

// TestRedisSentinelLoop runs the loop through Redis Sentinel: the service
// finds the master by name. It runs when REDIS_SENTINEL_URL names a
// sentinel (.ci/run starts one), for example
// redis-sentinel://127.0.0.1:17211/mymaster/15.
func TestRedisSentinelLoop(t *testing.T) {
	url := os.Getenv("REDIS_SENTINEL_URL")
	if url == "" {
		t.Skip("REDIS_SENTINEL_URL is not set")
	}
	rdb, err := store.Open(url)
	must(t, err)
	must(t, rdb.FlushDB(context.Background()).Err())
	rdb.Close()

	srv := startService(t, serviceOpts{Config: loopConfig(1, "console"), RedisURL: url,
		Env: map[string]string{"COUNTERSIGN_SMTP_URL": "smtp://127.0.0.1:1?tls=none"}})
	o := srv.prepareSend(t, `{"action":"email.send","input":{"to":["client@client.example"],"subject":"s","text":"t"}}`)
	link := srv.consoleLink(t, o.Key, "grace")
	if st, _ := newBrowser().decide(t, link, "reject", "through sentinel"); st != 200 {
		t.Fatalf("decide: %d", st)
	}
	if got := srv.waitFor(t, o.Key, "rejected"); got.Approval.Rejection.Reason != "through sentinel" {
		t.Fatalf("%+v", got.Approval.Rejection)
	}
}
