package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/redis/go-redis/v9"
)

// serve refuses a single Redis that could lose a claim in a crash
// (appendfsync everysec) unless COUNTERSIGN_REDIS_MIN_REPLICAS=0 accepts
// the risk, and starts on one with appendfsync always.
func TestServeRefusesARedisThatCannotKeepAClaim(t *testing.T) {
	everysec := redistest.StartProcess(t, "--appendonly", "yes", "--appendfsync", "everysec")
	always := redistest.StartProcess(t, "--appendonly", "yes", "--appendfsync", "always")
	cfg := filepath.Join(t.TempDir(), "countersign.yaml")
	must(t, os.WriteFile(cfg, []byte(loopConfig(1, "console")), 0o600))
	smtp := smtptest.Start(t, smtptest.Options{}) // the file names email.send
	start := func(url string, extra map[string]string) (string, error) {
		env := map[string]string{"COUNTERSIGN_CONFIG": cfg, "COUNTERSIGN_LISTEN": "127.0.0.1:0", "COUNTERSIGN_REDIS_URL": url,
			"COUNTERSIGN_LINK_KEYS": testLinkKeys, "COUNTERSIGN_SMTP_URL": smtp.URL()}
		for k, v := range extra {
			env[k] = v
		}
		var out bytes.Buffer
		err := (&Main{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Stderr: &out}).openAndClose()
		return out.String(), err
	}
	if _, err := start(everysec.URL(), nil); err == nil || !strings.Contains(err.Error(), "appendfsync always") {
		t.Fatalf("start on a single Redis with everysec: %v", err)
	}
	if out, err := start(everysec.URL(), map[string]string{"COUNTERSIGN_REDIS_MIN_REPLICAS": "0"}); err != nil || !strings.Contains(out, "may execute twice") {
		t.Fatalf("start with the risk accepted: %v\n%s", err, out)
	}
	if _, err := start(always.URL(), nil); err != nil {
		t.Fatalf("start on a single Redis with appendfsync always: %v", err)
	}
	if _, err := start(always.URL(), map[string]string{"COUNTERSIGN_REDIS_MIN_REPLICAS": "many"}); err == nil || !strings.Contains(err.Error(), "COUNTERSIGN_REDIS_MIN_REPLICAS") {
		t.Fatalf("start with a word for a number: %v", err)
	}
	if _, err := start(always.URL(), map[string]string{"COUNTERSIGN_REDIS_WAIT_TIMEOUT": "soon"}); err == nil || !strings.Contains(err.Error(), "COUNTERSIGN_REDIS_WAIT_TIMEOUT") {
		t.Fatalf("start with a bad wait timeout: %v", err)
	}
}

// With a replica (auto waits for one), a prepare the replica did not
// acknowledge is answered 503 unavailable with details.outcome_unknown,
// never 201; once the replica is back, the agent's retry with the same
// idempotency key finds the one operation it made.
func TestPrepareNotOnTheReplicaIsAnsweredOutcomeUnknown(t *testing.T) {
	master := redistest.StartProcess(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.StartProcess(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	mc := redistest.Client(t, master.URL())
	waitUntil(t, 20*time.Second, "the replica to sync", func() bool {
		n, _ := mc.Pipelined(context.Background(), func(p redis.Pipeliner) error {
			p.Incr(context.Background(), "sync")
			p.Do(context.Background(), "WAIT", 1, 200)
			return nil
		})
		return len(n) == 2 && n[1].(*redis.Cmd).Val() == int64(1)
	})
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "console"), RedisURL: master.URL(),
		Env: map[string]string{"COUNTERSIGN_REDIS_MIN_REPLICAS": "auto", "COUNTERSIGN_SMTP_URL": smtp.URL()}})
	body := strings.Replace(emailBody, `"input"`, `"idempotency_key":"k-outcome","input"`, 1)

	replica.Pause()
	st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, body)
	var e struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	must(t, json.Unmarshal(b, &e))
	if st != 503 || e.Error.Code != "unavailable" || e.Error.Details["outcome_unknown"] != true {
		replica.Resume()
		t.Fatalf("prepare while the replica stalls: %d %s", st, b)
	}
	replica.Resume()
	var first string
	waitUntil(t, 10*time.Second, "the retry to be answered", func() bool {
		st, b = srv.call(t, "POST", "/v1/operations", srv.APIKey, body)
		var v struct {
			Key string `json:"operation_key"`
		}
		_ = json.Unmarshal(b, &v)
		first = v.Key
		return st == 200 || st == 201
	})
	st, b = srv.call(t, "POST", "/v1/operations", srv.APIKey, body)
	if st != 200 || !strings.Contains(string(b), first) {
		t.Fatalf("the same idempotency key again: %d %s (first %s)", st, b, first)
	}
}
