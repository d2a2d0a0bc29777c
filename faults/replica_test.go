//go:build faults

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

// takeovers holds every measured takeover time (kill → another replica
// delivered the notification), for the table.
var (
	takeoverMu sync.Mutex
	takeovers  []time.Duration
)

// sendOne prepares and sends one operation of the run, with retries.
func (rn *run) sendOne(ctx context.Context, r *rand.Rand) *opRec {
	o := rn.newOp()
	o.started, o.fate = true, approve
	rn.prepare(ctx, r, o, false)
	if o.key == "" {
		rn.c.t.Fatalf("op %d: not acknowledged", o.i)
	}
	if st := rn.agentPost(ctx, r, o, "send"); st != 202 {
		rn.c.t.Fatalf("op %d: send answered %d", o.i, st)
	}
	return o
}

// approveAll has both approvers approve o through their newest links.
func (rn *run) approveAll(ctx context.Context, r *rand.Rand, o *opRec) {
	for _, who := range []string{"grace", "ada"} {
		if l := rn.c.mail.waitLink(ctx, rn.c, o.key, who, 30*time.Second); l != "" {
			rn.click(ctx, r, o, who, l, "approve")
		} else {
			o.noMail = true
		}
	}
}

// stalledFor returns the replica sending a mail about key that the SMTP
// sink holds the reply of, and to whom.
func (c *cluster) stalledFor(key string) (*replica, string) {
	for _, m := range c.smtp.Stalled() {
		k, link := mailOp(m)
		if k == key && len(m.To) == 1 {
			return c.replicaOf(link), approverOf[m.To[0]]
		}
	}
	return nil, ""
}

// TestReplicaKill: a replica SIGKILLed while it delivers an approval
// notification (the SMTP reply held back), measuring how long until
// another replica delivers it; then a replica killed after its claim
// (while it re-reads the target) and one killed mid-write (the write at
// the target, its answer held). Those two must be surfaced as stuck for an
// operator (SPEC §2: a dead process's execution is never retried).
func TestReplicaKill(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	rn := newRun(c, uint64(seed()))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := rand.New(rand.NewPCG(uint64(seed()), 11))
	rounds := 1
	if long() {
		rounds = 5
	}
	var measured []time.Duration
	dupMail := 0
	for round := range rounds {
		c.smtp.SetFail(smtptest.Fail{StallAfterData: 20 * time.Second})
		o := rn.sendOne(ctx, r)
		var victim *replica
		var who string
		deadline := time.Now().Add(15 * time.Second)
		for victim == nil && time.Now().Before(deadline) {
			victim, who = c.stalledFor(o.key)
			time.Sleep(10 * time.Millisecond)
		}
		if victim == nil {
			t.Fatalf("round %d: no replica was delivering the notification of %s", round, o.key)
		}
		victim.kill()
		killedAt := time.Now()
		c.smtp.SetFail(smtptest.Fail{})
		var took time.Duration
		for {
			c.mail.refresh(c)
			c.mail.mu.Lock()
			from := c.mail.from[o.key][who]
			c.mail.mu.Unlock()
			delivered := false
			for _, i := range from {
				if i != victim.i {
					delivered = true
				}
			}
			if delivered {
				took = time.Since(killedAt)
				break
			}
			if time.Since(killedAt) > 90*time.Second {
				t.Fatalf("round %d: no other replica delivered %s's notification of %s within 90 s of the kill", round, who, o.key)
			}
			time.Sleep(20 * time.Millisecond)
		}
		measured = append(measured, took)
		t.Logf("round %d: replica %d killed mid-delivery; replica took over in %s", round, victim.i, took.Round(time.Millisecond))
		c.start(victim)
		rn.approveAll(ctx, r, o)
		rn.follow(ctx, r, o, time.Now().Add(20*time.Second))
		if n := c.mail.deliveries(c, o.key, who); n > 1 {
			t.Errorf("round %d: %s got %d notifications of %s: more than one duplicate with the one the killed replica sent", round, who, n, o.key)
		}
		// the victim's mail was received in full (its reply held): the
		// approver gets it too, once the server lets it through
		held := 0
		for _, m := range c.smtp.Stalled() {
			if k, _ := mailOp(m); k == o.key && len(m.To) == 1 && approverOf[m.To[0]] == who {
				held++
			}
		}
		dupMail += c.mail.deliveries(c, o.key, who) + held - 1
	}

	// Killed after the claim, before the write: the re-read is held.
	killHolding := func(name string, get, put time.Duration) {
		o := rn.sendOne(ctx, r)
		c.mail.waitLink(ctx, c, o.key, "ada", 30*time.Second)
		c.target.hold(get, put)
		rn.approveAll(ctx, r, o)
		deadline := time.Now().Add(30 * time.Second)
		var victim *replica
		for victim == nil && time.Now().Before(deadline) {
			for _, a := range c.target.heldFrom(o.path) {
				if v := c.ownerOf(a); v != nil {
					victim = v
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.target.hold(0, 0)
		if victim == nil {
			t.Fatalf("%s: no replica was found holding the request for %s", name, o.key)
		}
		victim.kill()
		t.Logf("%s: replica %d killed while its request for %s was held at the target", name, victim.i, o.key)
		time.Sleep(2 * time.Second)
		c.start(victim)
	}
	killHolding("after the claim", 5*time.Second, 0)
	killHolding("mid-write", 0, 5*time.Second)

	res := rn.settle(ctx, "replica SIGKILL mid-delivery, after claim, mid-write", 20*time.Second)
	sort.Slice(measured, func(i, j int) bool { return measured[i] < measured[j] })
	var parts []string
	for _, d := range measured {
		parts = append(parts, d.Round(10*time.Millisecond).String())
	}
	res.Notes = append(res.Notes, fmt.Sprintf("takeover after a replica kill mid-delivery (kill → another replica's notification accepted): %s; duplicate notifications (the killed replica's mail, received in full, counted): %d",
		strings.Join(parts, ", "), dupMail))
	takeoverMu.Lock()
	takeovers = append(takeovers, measured...)
	takeoverMu.Unlock()
	record(res)
	res.check(t)
	if res.Stuck != 2 {
		t.Errorf("the two operations whose replica died after the claim must be left executing for an operator; %d are", res.Stuck)
	}
	for _, d := range measured {
		if d > 10*time.Second {
			t.Errorf("takeover took %s, want ≤ 10 s", d)
		}
	}
}
