//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fullView is the part of an operation's JSON the scenarios below read.
type fullView struct {
	Key    string `json:"operation_key"`
	Status string `json:"status"`
	Error  *struct {
		Code           string         `json:"code"`
		Message        string         `json:"message"`
		OutcomeUnknown *bool          `json:"outcome_unknown"`
		Details        map[string]any `json:"details"`
	} `json:"error"`
	Result   json.RawMessage `json:"result"`
	NextStep string          `json:"next_step"`
	Lease    bool            `json:"lease_live"`
}

type lateView struct {
	Late *struct {
		Status string `json:"status"`
		Error  *struct {
			OutcomeUnknown *bool          `json:"outcome_unknown"`
			Details        map[string]any `json:"details"`
		} `json:"error"`
	} `json:"late_outcome"`
}

func (v *fullView) late() *lateView {
	var lv lateView
	if len(v.Result) == 0 || json.Unmarshal(v.Result, &lv) != nil || lv.Late == nil {
		return nil
	}
	return &lv
}

// agentView reads an operation as its agent sees it, from a live replica.
func (rn *run) agentView(ctx context.Context, key string) *fullView {
	for attempt := 0; attempt < 50 && ctx.Err() == nil; attempt++ {
		live := rn.c.live()
		st, b, _ := rn.call(ctx, "GET", live[attempt%len(live)].url+"/v1/operations/"+key, agentKey, "", "")
		if st == 200 {
			var v fullView
			if json.Unmarshal(b, &v) == nil {
				return &v
			}
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return nil
}

// reconcile asks a replica other than not to settle key; it returns the
// HTTP status and the body.
func (rn *run) reconcile(ctx context.Context, via *replica, key, outcome, note string) (int, string) {
	body := fmt.Sprintf(`{"outcome":%q,"note":%q}`, outcome, note)
	st, b, _ := rn.call(ctx, "POST", via.url+"/v1/admin/operations/"+key+"/reconcile", operatorKey, "application/json", body)
	return st, string(b)
}

// other returns a live replica other than r.
func (c *cluster) other(r *replica) *replica {
	for _, x := range c.live() {
		if x != r {
			return x
		}
	}
	return nil
}

// events returns the audit events of key, by name.
func (rn *run) events(ctx context.Context, via *replica, key string) []string {
	st, b, _ := rn.call(ctx, "GET", via.url+"/v1/admin/operations/"+key, operatorKey, "", "")
	if st != 200 {
		return nil
	}
	var v struct {
		Events []struct {
			Event string `json:"event"`
		} `json:"events"`
	}
	_ = json.Unmarshal(b, &v)
	var out []string
	for _, e := range v.Events {
		out = append(out, e.Event)
	}
	return out
}

// waitLate polls until key has a late outcome, at most d.
func (rn *run) waitLate(ctx context.Context, key string, d time.Duration) *fullView {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if v := rn.agentView(ctx, key); v != nil && v.late() != nil {
			return v
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return nil
}

// executorOf waits until the operation is executing and one replica holds
// a request of it at the target, and returns that replica.
func (c *cluster) executorOf(ctx context.Context, rn *run, o *opRec, d time.Duration) *replica {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if v := rn.agentView(ctx, o.key); v != nil && v.Status == "executing" {
			for _, a := range c.target.heldFrom(o.path) {
				if r := c.ownerOf(a); r != nil {
					return r
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

const testLease = 5 * time.Second

// TestPausedExecutor: an executor SIGSTOPped after its claim, past its
// lease, while an operator settles its operation; then SIGCONT.
//
//   - paused before its write (its re-read held at the target): the
//     operator's "failed" is refused while the lease is live and accepted
//     once it passed; on resume the executor finds its claim fenced and
//     writes nothing; what it found is kept as late_outcome.
//   - paused with its write on the wire (the PATCH held at the target):
//     the operator may settle only as unknown; on resume the write's
//     answer arrives and is kept as late_outcome (succeeded), the status
//     stays, and the agent is told it happened.
//
// Invariants: no write after the settlement in the first case, one write
// at most ever, every effect recorded, the agent never told "failed before
// anything was sent" where something may have been sent.
func TestPausedExecutor(t *testing.T) {
	c := startCluster(t, clusterOpts{lease: testLease.String()})
	rn := newRun(c, uint64(seed()))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := rand.New(rand.NewPCG(uint64(seed()), 20))
	var notes []string

	// 1. Paused before the write.
	o := rn.sendOne(ctx, r)
	c.mail.waitLink(ctx, c, o.key, "ada", 30*time.Second)
	c.target.hold(8*time.Second, 0) // the executor's re-read, before its write
	rn.approveAll(ctx, r, o)
	victim := c.executorOf(ctx, rn, o, 30*time.Second)
	if victim == nil {
		t.Fatalf("no replica was found executing %s", o.key)
	}
	victim.pause()
	pausedAt := time.Now()
	c.target.hold(0, 0)
	via := c.other(victim)
	st, body := rn.reconcile(ctx, via, o.key, "failed", "fault suite: nothing at the target")
	if st != 409 || !strings.Contains(body, "lease_remaining_seconds") {
		t.Errorf("settling as failed right after the pause answered %d %s; want 409 with lease_remaining_seconds", st, body)
	}
	var acceptedAfter time.Duration
	for ctx.Err() == nil {
		st, body = rn.reconcile(ctx, via, o.key, "failed", "fault suite: nothing at the target")
		if st == 200 {
			acceptedAfter = time.Since(pausedAt)
			break
		}
		if st != 409 || time.Since(pausedAt) > 3*testLease {
			t.Fatalf("settling as failed answered %d %s, %s after the pause", st, body, time.Since(pausedAt))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if acceptedAfter > testLease+2*time.Second {
		t.Errorf("failed accepted only %s after the pause; the lease is %s", acceptedAfter, testLease)
	}
	rn.follow(ctx, r, o, time.Now().Add(5*time.Second))  // the agent sees it failed
	sleep(ctx, time.Until(pausedAt.Add(10*time.Second))) // the held re-read is answered meanwhile
	victim.resume()
	pause1 := time.Since(pausedAt)
	v := rn.waitLate(ctx, o.key, 30*time.Second)
	switch {
	case v == nil:
		t.Errorf("paused before its write: no late outcome recorded for %s", o.key)
	case v.Status != "failed" || v.late().Late.Status != "failed" || v.late().Late.Error == nil || v.late().Late.Error.Details["phase"] != "fence":
		t.Errorf("paused before its write: status %s, late outcome %s", v.Status, v.Result)
	case strings.Contains(v.NextStep, "before anything was sent"):
		t.Errorf("paused before its write: next step %q", v.NextStep)
	}
	if n := c.target.writesTo(o.path); n != 0 {
		t.Errorf("paused before its write: the executor wrote %d times after the operator settled it", n)
	}
	if evs := strings.Join(rn.events(ctx, via, o.key), ","); !strings.Contains(evs, "reconciled,late_outcome") {
		t.Errorf("paused before its write: audit events %s", evs)
	}
	lateOf := "no late outcome"
	if v != nil && v.late() != nil {
		lateOf = "late_outcome " + v.late().Late.Status
		if e := v.late().Late.Error; e != nil && e.Details["phase"] != nil {
			lateOf += fmt.Sprintf(" (phase %v)", e.Details["phase"])
		}
	}
	notes = append(notes, fmt.Sprintf("paused before the write (SIGSTOP %s, lease %s): settling as failed refused with 409 until %s after the pause, then accepted; on SIGCONT the executor wrote %d times and recorded %s",
		pause1.Round(100*time.Millisecond), testLease, acceptedAfter.Round(100*time.Millisecond), c.target.writesTo(o.path), lateOf))

	// 2. Paused with its write on the wire.
	o2 := rn.sendOne(ctx, r)
	c.mail.waitLink(ctx, c, o2.key, "ada", 30*time.Second)
	c.target.hold(0, 8*time.Second)
	rn.approveAll(ctx, r, o2)
	victim2 := c.executorOf(ctx, rn, o2, 30*time.Second)
	if victim2 == nil {
		t.Fatalf("no replica was found writing %s", o2.key)
	}
	victim2.pause()
	paused2 := time.Now()
	c.target.hold(0, 0)
	via = c.other(victim2)
	if st, body := rn.reconcile(ctx, via, o2.key, "succeeded", "fault suite: the write is at the target"); st != 409 {
		t.Errorf("settling as succeeded while the lease is live answered %d %s; want 409", st, body)
	}
	if st, body := rn.reconcile(ctx, via, o2.key, "unknown", "fault suite: executor frozen mid-write"); st != 200 {
		t.Fatalf("settling as unknown answered %d %s", st, body)
	}
	rn.follow(ctx, r, o2, time.Now().Add(5*time.Second))
	if v := rn.agentView(ctx, o2.key); v == nil || v.Error == nil || v.Error.OutcomeUnknown == nil || !*v.Error.OutcomeUnknown ||
		strings.Contains(v.NextStep, "before anything was sent") || strings.Contains(v.NextStep, "may prepare it again") {
		t.Errorf("after the unknown settlement the agent sees %+v", v)
	}
	sleep(ctx, time.Until(paused2.Add(testLease+5*time.Second)))
	victim2.resume()
	pause2 := time.Since(paused2)
	v = rn.waitLate(ctx, o2.key, 30*time.Second)
	switch {
	case v == nil:
		t.Errorf("paused mid-write: no late outcome recorded for %s", o2.key)
	case v.Status != "failed" || v.late().Late.Status != "succeeded":
		t.Errorf("paused mid-write: status %s, late outcome %s", v.Status, v.Result)
	case !strings.Contains(v.NextStep, "did happen"):
		t.Errorf("paused mid-write: next step %q", v.NextStep)
	}
	if n := c.target.writesTo(o2.path); n != 1 {
		t.Errorf("paused mid-write: %d writes, want exactly 1", n)
	}
	notes = append(notes, fmt.Sprintf("paused mid-write (SIGSTOP %s): succeeded refused with 409, unknown accepted at once; on SIGCONT the write's answer arrived and was recorded as late_outcome succeeded; %d write(s), status stayed failed (unknown)",
		pause2.Round(100*time.Millisecond), c.target.writesTo(o2.path)))

	res := rn.settle(ctx, "executor SIGSTOPped past its lease, operator settling", 20*time.Second)
	res.Notes = append(res.Notes, notes...)
	record(res)
	res.check(t)
}

// TestTargetRefusals: a target that answers slowly, 429 and 503 with
// Retry-After (seconds and an HTTP date). The items target retries 429 and
// 503 at most twice (retry: {on: [429, 503], max: 2}); the late target has
// no retry. Every refusal must be reported as sent and refused
// (http_status, retry_after, outcome_unknown false), retries must happen
// only where configured, and no Idempotency-Key may be applied twice.
func TestTargetRefusals(t *testing.T) {
	c := startCluster(t, clusterOpts{retry: "{on: [429, 503], max: 2}"})
	rn := newRun(c, uint64(seed()))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := rand.New(rand.NewPCG(uint64(seed()), 21))
	type tc struct {
		name     string
		target   string
		refusals []refusal
		slow     time.Duration
		status   string // final status
		http     int    // error.details.http_status (0: none)
		after    int    // error.details.retry_after (-1: none)
		requests int    // PATCH requests with its Idempotency-Key
	}
	httpDate := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	cases := []tc{
		{"429 twice, then accepted (retried)", "items", []refusal{{429, "1"}, {429, "1"}}, 0, "succeeded", 0, -1, 3},
		{"503 every time (retries exhausted)", "items", []refusal{{503, "1"}, {503, "1"}, {503, "1"}, {503, "1"}}, 0, "failed", 503, 1, 3},
		{"429 asking for 2 minutes (not retried)", "items", []refusal{{429, "120"}}, 0, "failed", 429, 120, 1},
		{"429 without retry configured", "late", []refusal{{429, "30"}}, 0, "failed", 429, 30, 1},
		{"503 with an HTTP date, no retry configured", "late", []refusal{{503, httpDate(40 * time.Second)}}, 0, "failed", 503, 40, 1},
		{"slow answer (4 s)", "items", nil, 4 * time.Second, "succeeded", 0, -1, 1},
	}
	var notes []string
	for _, k := range cases {
		o := rn.newOp()
		o.started, o.fate, o.target = true, approve, k.target
		rn.prepare(ctx, r, o, false)
		if o.key == "" {
			t.Fatalf("%s: not acknowledged", k.name)
		}
		if st := rn.agentPost(ctx, r, o, "send"); st != 202 {
			t.Fatalf("%s: send answered %d", k.name, st)
		}
		c.mail.waitLink(ctx, c, o.key, "ada", 30*time.Second)
		c.target.refuseNext(o.path, k.refusals...)
		c.target.hold(0, k.slow)
		start := time.Now()
		rn.approveAll(ctx, r, o)
		rn.follow(ctx, r, o, time.Now().Add(60*time.Second))
		took := time.Since(start)
		c.target.hold(0, 0)
		v := rn.agentView(ctx, o.key)
		if v == nil {
			t.Fatalf("%s: unreadable", k.name)
		}
		reqs := c.target.requestsWithKey(o.key)
		notes = append(notes, fmt.Sprintf("%s: %s after %s, %d request(s) with its Idempotency-Key, %d refused, %d applied",
			k.name, v.Status, took.Round(100*time.Millisecond), reqs, c.target.refusedOf(o.path), c.target.writesTo(o.path)))
		if v.Status != k.status {
			t.Errorf("%s: status %s, want %s (%s)", k.name, v.Status, k.status, v.NextStep)
			continue
		}
		if reqs != k.requests {
			t.Errorf("%s: %d requests with Idempotency-Key %s, want %d", k.name, reqs, o.key, k.requests)
		}
		if n := c.target.writesTo(o.path); n > 1 {
			t.Errorf("%s: applied %d times", k.name, n)
		}
		if k.status != "failed" {
			continue
		}
		e := v.Error
		if e == nil || e.Code != "execution_failed" || e.OutcomeUnknown == nil || *e.OutcomeUnknown {
			t.Errorf("%s: error %+v", k.name, e)
			continue
		}
		if got, _ := e.Details["http_status"].(float64); int(got) != k.http {
			t.Errorf("%s: http_status %v, want %d", k.name, e.Details["http_status"], k.http)
		}
		ra, has := e.Details["retry_after"].(float64)
		if k.after >= 0 && (!has || int(ra) < k.after-20 || int(ra) > k.after) { // an HTTP date counts down
			t.Errorf("%s: retry_after %v, want %d", k.name, e.Details["retry_after"], k.after)
		}
		if strings.Contains(v.NextStep, "before anything was sent") || !strings.Contains(v.NextStep, "refused it") {
			t.Errorf("%s: next step %q", k.name, v.NextStep)
		}
	}
	res := rn.settle(ctx, "target slow, 429 and 503 with Retry-After", 20*time.Second)
	res.Notes = append(res.Notes, notes...)
	record(res)
	res.check(t)
}
