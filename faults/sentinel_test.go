//go:build faults

package faults

// Redis Sentinel under load (issue 20): one master, one replica, one
// Sentinel, real processes on private loopback ports. The service finds
// the master through the Sentinel and, seeing a replica, waits for it on
// every transition (COUNTERSIGN_REDIS_MIN_REPLICAS auto → 1).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/redistest"
)

type sentinel struct {
	port int
	cmd  *exec.Cmd
}

// startSentinel watches the master on port (quorum 1, down after 1 s).
func startSentinel(t *testing.T, master int) *sentinel {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed")
	}
	s := &sentinel{port: freePort(t)}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
		"sentinel monitor mymaster 127.0.0.1 %d 1\nsentinel down-after-milliseconds mymaster 1000\n"+
		"sentinel failover-timeout mymaster 10000\n", s.port, dir, filepath.Join(dir, "sentinel.log"), master), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, conf, "--sentinel")
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for s.masterPort() != master {
		if time.Now().After(deadline) {
			t.Fatal("the sentinel does not watch the master")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// and knows its replica
	for !strings.Contains(s.cli("SENTINEL", "REPLICAS", "mymaster"), "127.0.0.1") {
		if time.Now().After(deadline) {
			t.Fatal("the sentinel does not know the replica")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

func (s *sentinel) cli(args ...string) string {
	out, _ := exec.Command("redis-cli", append([]string{"-p", strconv.Itoa(s.port)}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// masterPort is the port of the master the Sentinel names now (0 if none).
func (s *sentinel) masterPort() int {
	lines := strings.Fields(s.cli("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"))
	if len(lines) != 2 {
		return 0
	}
	p, _ := strconv.Atoi(lines[1])
	return p
}

// master and replica are the processes in those roles now, per the
// Sentinel.
func (c *cluster) roles() (master, replica *redistest.Process) {
	if c.sentinel.masterPort() == c.second.Port {
		return c.second, c.redis
	}
	return c.redis, c.second
}

// waitSynced waits until master has a replica online that acknowledges
// its writes, at most 30 s: a write and WAIT on one connection.
func (c *cluster) waitSynced(master *redistest.Process) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cmd := exec.Command("redis-cli", "-p", strconv.Itoa(master.Port))
		cmd.Stdin = strings.NewReader("INCR faults:sync\nWAIT 1 300\nROLE\n")
		out, _ := cmd.CombinedOutput()
		lines := strings.Fields(string(out))
		if len(lines) >= 3 && lines[1] == "1" && lines[2] == "master" {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// promoted waits until the Sentinel names another master than before,
// at most 30 s, and returns how long it took.
func (c *cluster) promoted(before int, since time.Time) (time.Duration, bool) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if p := c.sentinel.masterPort(); p != 0 && p != before {
			return time.Since(since), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, false
}

// sentinelSize is the load of a Sentinel scenario: long enough that the
// fault lands mid-load.
func sentinelSize() size {
	sz := sized(8, 100*time.Millisecond, 60*time.Millisecond)
	if !long() {
		sz.run = 7 * time.Second
	}
	return sz
}

// TestSentinelFailover: a planned SENTINEL FAILOVER under load (once in
// short runs, three times in long ones).
func TestSentinelFailover(t *testing.T) {
	c := startCluster(t, clusterOpts{sentinel: true, replicas: 2})
	rounds := 1
	if long() {
		rounds = 3
	}
	var notes []string
	res := scenario(t, "sentinel: planned failover", c, sentinelSize(), 40*time.Second, func(ctx context.Context, r *rand.Rand) {
		for round := range rounds {
			sleep(ctx, time.Duration(1500+r.IntN(1500))*time.Millisecond)
			if ctx.Err() != nil {
				return
			}
			before := c.sentinel.masterPort()
			at := time.Now()
			if out := c.sentinel.cli("SENTINEL", "FAILOVER", "mymaster"); out != "OK" {
				c.t.Errorf("round %d: SENTINEL FAILOVER: %s", round, out)
				return
			}
			took, ok := c.promoted(before, at)
			if !ok {
				c.t.Errorf("round %d: the sentinel did not switch masters within 30 s", round)
				return
			}
			m, _ := c.roles()
			c.waitSynced(m)
			notes = append(notes, fmt.Sprintf("failover %d: switched in %s, replica in sync %s after", round, took.Round(10*time.Millisecond), time.Since(at).Round(10*time.Millisecond)))
		}
	})
	res.Notes = append(res.Notes, notes...)
	for _, n := range notes {
		t.Log(n)
	}
}

// TestSentinelMasterKill: the master SIGKILLed under load; the Sentinel
// promotes the replica; the killed process comes back (from its AOF) and
// the Sentinel makes it the new master's replica.
func TestSentinelMasterKill(t *testing.T) {
	c := startCluster(t, clusterOpts{sentinel: true, replicas: 2})
	var notes []string
	res := scenario(t, "sentinel: master SIGKILL", c, sentinelSize(), 40*time.Second, func(ctx context.Context, r *rand.Rand) {
		sleep(ctx, time.Duration(1500+r.IntN(1500))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		notes = append(notes, c.killMaster(ctx, 0))
	})
	res.Notes = append(res.Notes, notes...)
	for _, n := range notes {
		t.Log(n)
	}
}

// TestSentinelReplicationLag: the replication stream is held for 3 s
// under load (a fault proxy between the replica and the master holds it;
// a SIGSTOPped replica would not do, its socket buffer keeps the stream),
// so the master runs ahead of its replica; then the master is SIGKILLed,
// the held stream dropped, and the replica promoted without what the
// master took in those 3 s. Nothing of it may have been acknowledged.
func TestSentinelReplicationLag(t *testing.T) {
	c := startCluster(t, clusterOpts{sentinel: true, replLink: true, replicas: 2})
	var notes []string
	res := scenario(t, "sentinel: 3 s replication lag, then master SIGKILL", c, sentinelSize(), 40*time.Second, func(ctx context.Context, r *rand.Rand) {
		sleep(ctx, time.Duration(1000+r.IntN(1000))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		c.replLink.Pause()
		sleep(ctx, 3*time.Second)
		notes = append(notes, c.killMaster(ctx, 0, func() {
			c.replLink.Down() // what it held is gone with the master
			c.replLink.Resume()
		}))
	})
	res.Notes = append(res.Notes, notes...)
	for _, n := range notes {
		t.Log(n)
	}
}

// killMaster SIGKILLs the current master, runs then (after delay) — the
// lag scenario resumes its replica there — waits for the promotion,
// restarts the killed process and waits until the new master has it as
// a replica in sync. It returns a note of the times.
func (c *cluster) killMaster(ctx context.Context, delay time.Duration, then ...func()) string {
	m, _ := c.roles()
	before := c.sentinel.masterPort()
	at := time.Now()
	m.Kill()
	sleep(ctx, delay)
	for _, f := range then {
		f()
	}
	took, ok := c.promoted(before, at)
	if !ok {
		c.t.Errorf("the sentinel did not promote the replica within 30 s of the kill")
		return "no promotion"
	}
	sleep(ctx, time.Second)
	m.Restart() // from its AOF; the Sentinel makes it a replica
	nm, _ := c.roles()
	synced := c.waitSynced(nm)
	return fmt.Sprintf("master killed: promoted in %s, old master back as a replica in sync after %s (%v)", took.Round(10*time.Millisecond), time.Since(at).Round(10*time.Millisecond), synced)
}
