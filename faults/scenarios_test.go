//go:build faults

package faults

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

var binPath string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "countersign-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = os.Getenv("COUNTERSIGN_FAULTS_BIN")
	if binPath == "" {
		binPath = filepath.Join(dir, "countersign")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/countersign/countersign/cmd/countersign")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "faults: build countersign:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	printTable(os.Stdout)
	writeTable()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// long says whether to run the long version (scripts/faults.sh): without
// -short, or with COUNTERSIGN_FAULTS_LONG=1.
func long() bool { return !testing.Short() || os.Getenv("COUNTERSIGN_FAULTS_LONG") == "1" }

var seedOnce = sync.OnceValue(func() int64 {
	if s, err := strconv.ParseInt(os.Getenv("COUNTERSIGN_FAULTS_SEED"), 10, 64); err == nil {
		return s
	}
	return time.Now().UnixNano() % 1000000
})

// seed is the run's seed: COUNTERSIGN_FAULTS_SEED, or one chosen and
// logged, so that a failing run can be replayed.
func seed() int64 { return seedOnce() }

// size is how much load one scenario drives: operations start one every
// pace (at most ops of them) for run, with workers at once.
type size struct {
	ops, workers int
	pace         time.Duration
	run          time.Duration
	settle       time.Duration
}

func sized(workers int, shortPace, longPace time.Duration) size {
	if long() {
		return size{ops: 5000, workers: workers, pace: longPace, run: 60 * time.Second, settle: 40 * time.Second}
	}
	return size{ops: 5000, workers: workers, pace: shortPace, run: 4 * time.Second, settle: 20 * time.Second}
}

// scenario runs the driver against a cluster while fault runs beside it
// (until the driver is done), then settles and checks.
func scenario(t *testing.T, name string, c *cluster, sz size, mailWait time.Duration, fault func(ctx context.Context, r *rand.Rand)) *result {
	t.Logf("%s: seed %d (COUNTERSIGN_FAULTS_SEED replays it)", name, seed())
	rn := newRun(c, uint64(seed()))
	ctx, cancel := context.WithTimeout(context.Background(), sz.run+sz.settle+3*time.Minute)
	defer cancel()
	faultCtx, stopFault := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if fault != nil {
		wg.Add(1)
		go func() { defer wg.Done(); fault(faultCtx, rand.New(rand.NewPCG(uint64(seed()), 7))) }()
	}
	rn.drive(ctx, sz.run, sz.ops, sz.workers, sz.pace, mailWait)
	stopFault()
	wg.Wait()
	res := rn.settle(ctx, name, sz.settle)
	record(res)
	res.check(t)
	return res
}

// TestRandomized: the seeded driver alone, many operations at once:
// duplicate and concurrent clicks, agent retries with idempotency keys,
// cancels racing approvals, rejections, quorum 2, three replicas.
func TestRandomized(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	scenario(t, "randomized, no faults", c, sized(12, 60*time.Millisecond, 30*time.Millisecond), 20*time.Second, nil)
}

// TestProxyFaults: replies between the replicas and Redis delayed (past
// go-redis's read timeout, so it re-sends), dropped, or all traffic held,
// at random moments.
func TestProxyFaults(t *testing.T) {
	c := startCluster(t, clusterOpts{proxy: true})
	res := scenario(t, "proxy: replies delayed, dropped, held", c, sized(8, 120*time.Millisecond, 60*time.Millisecond), 40*time.Second, func(ctx context.Context, r *rand.Rand) {
		for ctx.Err() == nil {
			sleep(ctx, time.Duration(500+r.IntN(1500))*time.Millisecond)
			switch r.IntN(4) {
			case 0:
				c.proxy.Jitter(80 * time.Millisecond)
				sleep(ctx, time.Second)
				c.proxy.Jitter(0)
			case 1:
				c.proxy.Hold(1+r.IntN(4), 6*time.Second) // later than the client's read timeout
			case 2:
				c.proxy.DropReplies(0.05)
				sleep(ctx, 500*time.Millisecond)
				c.proxy.DropReplies(0)
			case 3:
				c.proxy.Pause()
				sleep(ctx, time.Duration(1+r.IntN(3))*time.Second)
				c.proxy.Resume()
			}
		}
		c.proxy.Resume()
		c.proxy.Jitter(0)
		c.proxy.DropReplies(0)
	})
	st := c.proxy.Stats()
	res.Notes = append(res.Notes, fmt.Sprintf("proxy: %d connections, %d replies held 6 s, %d replies dropped", st.Conns, st.Held, st.Dropped))
}

// TestRedisKill: Redis SIGKILLed and restarted (AOF everysec) at random
// moments under load, writes held at the target so that some are in
// flight (mid-execution) when it dies.
func TestRedisKill(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	c.target.hold(0, 300*time.Millisecond)
	kills, midWrite := 0, 0
	res := scenario(t, "redis SIGKILL + restart", c, sized(8, 120*time.Millisecond, 60*time.Millisecond), 40*time.Second, func(ctx context.Context, r *rand.Rand) {
		for ctx.Err() == nil {
			sleep(ctx, time.Duration(700+r.IntN(1500))*time.Millisecond)
			if ctx.Err() != nil {
				break
			}
			midWrite += c.target.inFlightCount()
			c.redis.Kill()
			kills++
			time.Sleep(time.Duration(300+r.IntN(1500)) * time.Millisecond)
			c.redis.Restart()
		}
	})
	res.Notes = append(res.Notes, fmt.Sprintf("Redis killed and restarted %d times, with %d writes in flight at the target at those moments (mid-execution)", kills, midWrite))
}

// TestRedisPause: Redis SIGSTOPped for 6 s and resumed, under load; every
// request in the meantime must answer (503) within 5 s.
func TestRedisPause(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	pauses := 0
	res := scenario(t, "redis SIGSTOP 6 s", c, sized(8, 120*time.Millisecond, 60*time.Millisecond), 40*time.Second, func(ctx context.Context, r *rand.Rand) {
		for ctx.Err() == nil {
			sleep(ctx, time.Duration(1000+r.IntN(1500))*time.Millisecond)
			if ctx.Err() != nil {
				break
			}
			c.redis.Pause()
			pauses++
			time.Sleep(6 * time.Second)
			c.redis.Resume()
			if !long() {
				return
			}
		}
	})
	res.Notes = append(res.Notes, fmt.Sprintf("Redis paused %d times for 6 s", pauses))
	if res.Slow > 0 {
		t.Errorf("%d requests took more than 5 s to answer while Redis was paused (slowest %s)", res.Slow, res.MaxLatency)
	}
}

// TestSMTPFaults: the mail server refuses, stalls, and drops the
// connection after DATA while approvals are being requested.
func TestSMTPFaults(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	res := scenario(t, "smtp down, slow, dropping", c, sized(8, 150*time.Millisecond, 80*time.Millisecond), 60*time.Second, func(ctx context.Context, r *rand.Rand) {
		for ctx.Err() == nil {
			sleep(ctx, time.Duration(1000+r.IntN(2000))*time.Millisecond)
			switch r.IntN(3) {
			case 0:
				c.smtp.SetFail(smtptest.Fail{DataCommand: 421})
			case 1:
				c.smtp.SetFail(smtptest.Fail{StallAfterData: 4 * time.Second})
			case 2:
				c.smtp.SetFail(smtptest.Fail{DropAfterData: true})
			}
			sleep(ctx, time.Duration(1000+r.IntN(2000))*time.Millisecond)
			c.smtp.SetFail(smtptest.Fail{})
		}
		c.smtp.SetFail(smtptest.Fail{})
	})
	// A mail whose body the server received in full reaches the approver,
	// whatever the reply: count those per operation and approver.
	received, dropped := map[string]int{}, 0
	for _, m := range c.smtp.Messages() {
		if m.Outcome == smtptest.Rejected || len(m.To) != 1 {
			continue
		}
		if m.Outcome == smtptest.Dropped {
			dropped++
		}
		if k, _ := mailOp(m); k != "" {
			received[k+"|"+m.To[0]]++
		}
	}
	dups, most := 0, 0
	for _, n := range received {
		dups += n - 1
		most = max(most, n)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("approval mails received in full more than once: %d (at most %d of one), after %d connections dropped after DATA: a sender cannot know such a mail was taken, so it sends again", dups, most, dropped))
}

// link rewrites an approval link to another replica.
func onReplica(link string, r *replica) string {
	i := strings.Index(link, "/a/")
	return r.url + link[i:]
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}
