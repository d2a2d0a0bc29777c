package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/redis/go-redis/v9"
)

// startSentinel runs one Redis Sentinel (quorum 1, a master down after
// 1 s) watching master as "mymaster", on a private port; it is stopped
// when the test ends. Sentinel must be started on a configuration file of
// its own (it rewrites it), so not through redistest.StartProcess.
func startSentinel(t *testing.T, master *redistest.Process) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port, given back at once
	must(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	must(t, ln.Close())
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	must(t, os.WriteFile(conf, fmt.Appendf(nil, "port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
		"sentinel monitor mymaster 127.0.0.1 %d 1\nsentinel down-after-milliseconds mymaster 1000\n"+
		"sentinel failover-timeout mymaster 10000\n", port, dir, filepath.Join(dir, "sentinel.log"), master.Port), 0o600))
	cmd := exec.Command(bin, conf, "--sentinel")
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	t.Cleanup(func() { _ = sc.Close() })
	waitUntil(t, 10*time.Second, "the sentinel to watch the master", func() bool {
		a, err := sc.GetMasterAddrByName(context.Background(), "mymaster").Result()
		return err == nil && len(a) == 2 && a[1] == strconv.Itoa(master.Port)
	})
	return port
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSentinelFailoverKeepsServing: the service finds Redis through a
// Sentinel; the master is SIGKILLed and the Sentinel promotes its
// replica. Without a restart the service serves again — an operation
// that waited across the failover is decided and runs, the agent's
// long-poll on it wakes, and the whole loop completes after it.
func TestSentinelFailoverKeepsServing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and redis-sentinel processes")
	}
	master := redistest.StartProcess(t, "--appendonly", "yes")
	replica := redistest.StartProcess(t, "--appendonly", "yes", "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	mc := redistest.Client(t, master.URL())
	waitUntil(t, 10*time.Second, "the replica to sync", func() bool {
		info, _ := mc.Info(context.Background(), "replication").Result()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	})
	port := startSentinel(t, master)

	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "console"), RedisURL: fmt.Sprintf("redis-sentinel://127.0.0.1:%d/mymaster/0", port),
		Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	n := 0
	body := func() string {
		n++
		return strings.Replace(emailBody, "Your invoice", fmt.Sprintf("Your invoice %d", n), 1)
	}
	first := srv.prepareSend(t, body())
	if st, _ := newBrowser().decide(t, srv.consoleLink(t, first.Key, "grace"), "approve", ""); st != 200 {
		t.Fatalf("approve before the failover: %d", st)
	}
	srv.waitFor(t, first.Key, "succeeded")

	// Pending across the failover, with the agent long-polling it.
	waiting := srv.prepareSend(t, body())
	link := srv.consoleLink(t, waiting.Key, "grace")
	srv.waitFor(t, waiting.Key, "pending_approval")
	time.Sleep(300 * time.Millisecond)
	// Everything acknowledged so far is on the replica before the master dies.
	must(t, mc.Do(context.Background(), "WAIT", 1, 2000).Err())

	killed := time.Now()
	master.Kill()
	sc := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer sc.Close()
	waitUntil(t, 30*time.Second, "the sentinel to promote the replica", func() bool {
		a, err := sc.GetMasterAddrByName(context.Background(), "mymaster").Result()
		return err == nil && len(a) == 2 && a[1] == strconv.Itoa(replica.Port)
	})
	promoted := time.Since(killed)

	// The service answers again (503 meanwhile is allowed), without a restart.
	var back time.Duration
	waitUntil(t, 30*time.Second, "the service to read from the new master", func() bool {
		st, _ := srv.call(t, "GET", "/v1/operations/"+waiting.Key, srv.APIKey, "")
		back = time.Since(killed)
		return st == 200
	})
	woke := longPoll(t, srv, waiting.Key)
	time.Sleep(300 * time.Millisecond) // it is waiting
	decided := time.Now()
	var st int
	waitUntil(t, 15*time.Second, "the approval to be taken", func() bool {
		st, _ = newBrowser().decide(t, link, "approve", "")
		return st == 200
	})
	select {
	case r := <-woke:
		if r.status == "pending_approval" || time.Since(decided) > 3*time.Second {
			t.Fatalf("the long-poll after the failover: %s, %s after the decision", r.status, time.Since(decided))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the long-poll after the failover never woke")
	}
	srv.waitFor(t, waiting.Key, "succeeded")

	last := srv.prepareSend(t, body())
	if st, _ := newBrowser().decide(t, srv.consoleLink(t, last.Key, "grace"), "approve", ""); st != 200 {
		t.Fatalf("approve after the failover: %d", st)
	}
	srv.waitFor(t, last.Key, "succeeded")
	if got := len(sentTo(smtp, "client@client.example")); got != 3 {
		t.Fatalf("%d emails executed, want 3", got)
	}
	t.Logf("master killed: promoted after %s, the service read again %s after the kill", promoted.Round(time.Millisecond), back.Round(time.Millisecond))
}
