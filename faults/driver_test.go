//go:build faults

package faults

// The seeded driver: an agent that prepares and sends operations with
// idempotency keys and retries, approvers who click their links (twice,
// at once, through different replicas), cancels racing approvals, and
// rejections; then the check of SPEC §3 over everything acknowledged.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type fate int

const (
	approve      fate = iota // both approvers approve, each clicking 1-3 times at once
	reject                   // one rejects while the other approves
	cancelRace               // the agent cancels while both approve
	cancelDraft              // the agent cancels before sending
	leavePending             // nobody decides
	expireFirst              // (long runs) the 1-minute window passes, then both try to approve
)

var fateWeights = []struct {
	f fate
	w int
}{{approve, 60}, {reject, 10}, {cancelRace, 15}, {cancelDraft, 5}, {leavePending, 10}}

func pickFate(r *rand.Rand, long bool) fate {
	n := r.IntN(100)
	if long && n < 3 {
		return expireFirst
	}
	for _, fw := range fateWeights {
		if n < fw.w {
			return fw.f
		}
		n -= fw.w
	}
	return approve
}

var terminal = map[string]bool{"succeeded": true, "failed": true, "rejected": true, "expired": true, "canceled": true, "superseded": true}

// opRec is what the driver knows of one operation.
type opRec struct {
	i        int
	fate     fate
	idem     string
	path     string
	key      string // acknowledged operation key ("" if never acknowledged)
	mu       sync.Mutex
	terminal string // first terminal status the agent saw
	approved bool   // some approval page confirmed an approval
	noMail   bool   // an approver's mail never came
	started  bool   // the driver began preparing it
	rank     int    // the furthest status the agent saw (rankOf)
	furthest string
	back     []string          // statuses seen going back ("succeeded → executing")
	thanked  map[string]string // approver → the decision a page answered "Thank you" to
	target   string            // the target to write to ("" for the fate's)
}

// rankOf orders the statuses: nothing ever returns to an earlier one
// (SPEC §2).
func rankOf(s string) int {
	switch s {
	case "draft":
		return 1
	case "pending_approval":
		return 2
	case "approved":
		return 3
	case "executing":
		return 4
	}
	if terminal[s] {
		return 5
	}
	return 0
}

func (o *opRec) sawStatus(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if terminal[s] && o.terminal == "" {
		o.terminal = s
	}
	if r := rankOf(s); r > o.rank {
		o.rank, o.furthest = r, s
	} else if r > 0 && r < o.rank {
		o.back = append(o.back, o.furthest+" → "+s)
	}
}

// thank records that who's decision was answered "Thank you".
func (o *opRec) thank(who, decision string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.thanked == nil {
		o.thanked = map[string]string{}
	}
	o.thanked[who] = decision
}

// run is one scenario's run of the driver.
type run struct {
	c      *cluster
	seed   uint64
	http   *http.Client
	ops    []*opRec
	mu     sync.Mutex
	slow   atomic.Int64 // requests that took more than 5 s to answer
	maxLat atomic.Int64 // slowest answer, ns
	errs   atomic.Int64 // transport errors (no answer at all)
}

func newRun(c *cluster, seed uint64) *run {
	return &run{c: c, seed: seed, http: &http.Client{Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// call makes one request to a replica and measures it.
func (rn *run) call(ctx context.Context, method, u, key, ctype string, body string) (int, []byte, http.Header) {
	return rn.callWith(ctx, rn.http, method, u, key, ctype, body)
}

func (rn *run) callWith(ctx context.Context, hc *http.Client, method, u, key, ctype string, body string) (int, []byte, http.Header) {
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", ctype)
	}
	start := time.Now()
	resp, err := hc.Do(req)
	d := time.Since(start)
	if strings.Contains(u, "wait=") {
		d = 0 // a long-poll waits on purpose; its bound is the wait plus the budget
	}
	if d > 5*time.Second && ctx.Err() == nil {
		rn.slow.Add(1)
	}
	for {
		m := rn.maxLat.Load()
		if int64(d) <= m || rn.maxLat.CompareAndSwap(m, int64(d)) {
			break
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			rn.errs.Add(1)
		}
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// pick returns a live replica at random.
func (rn *run) pick(r *rand.Rand) *replica {
	live := rn.c.live()
	if len(live) == 0 {
		return rn.c.replicas[0]
	}
	return live[r.IntN(len(live))]
}

// retryable says whether an answer is worth trying again: no answer, the
// store unavailable, or rate limited.
func retryable(st int) bool { return st == 0 || st == 503 || st == 429 || st == 502 }

type opView struct {
	Key    string `json:"operation_key"`
	Status string `json:"status"`
}

// prepare creates the operation, retrying with the same idempotency key;
// with dup it sends the same request twice at once, as a retrying agent
// whose first attempt only looked lost would.
func (rn *run) prepare(ctx context.Context, r *rand.Rand, o *opRec, dup bool) {
	tg := "items"
	if o.fate == expireFirst {
		tg = "late" // its route's approval window is one minute
	}
	if o.target != "" {
		tg = o.target
	}
	body := fmt.Sprintf(`{"action":"http.request","input":{"target":%q,"method":"PATCH","path":%q,"body":{"qty":%d}},"idempotency_key":%q}`, tg, o.path, o.i+1, o.idem)
	attempt := func(rr *rand.Rand) string {
		for ctx.Err() == nil {
			st, b, _ := rn.call(ctx, "POST", rn.pick(rr).url+"/v1/operations", agentKey, "application/json", body)
			if st == 201 || st == 200 {
				var v opView
				_ = json.Unmarshal(b, &v)
				return v.Key
			}
			if !retryable(st) {
				rn.c.t.Logf("op %d: prepare answered %d %s", o.i, st, b)
				return ""
			}
			sleep(ctx, time.Duration(100+rr.IntN(300))*time.Millisecond)
		}
		return ""
	}
	if !dup {
		o.key = attempt(r)
		return
	}
	keys := make([]string, 2)
	var wg sync.WaitGroup
	for j := range keys {
		rr := rand.New(rand.NewPCG(rn.seed, uint64(o.i)<<8|uint64(j)))
		wg.Add(1)
		go func() { defer wg.Done(); keys[j] = attempt(rr) }()
	}
	wg.Wait()
	o.key = keys[0]
	if o.key == "" {
		o.key = keys[1]
	}
	if keys[0] != "" && keys[1] != "" && keys[0] != keys[1] {
		rn.c.t.Errorf("op %d: one idempotency key gave two operations %s and %s", o.i, keys[0], keys[1])
	}
}

// agentPost sends or cancels, retrying until the service answers.
func (rn *run) agentPost(ctx context.Context, r *rand.Rand, o *opRec, verb string) int {
	for ctx.Err() == nil {
		st, b, _ := rn.call(ctx, "POST", rn.pick(r).url+"/v1/operations/"+o.key+"/"+verb, agentKey, "", "")
		if !retryable(st) {
			var v opView
			if json.Unmarshal(b, &v) == nil {
				o.sawStatus(v.Status)
			}
			return st
		}
		sleep(ctx, time.Duration(100+r.IntN(300))*time.Millisecond)
	}
	return 0
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// click opens the link on a replica, as a browser would, and presses a
// button; it retries while the service is unavailable.
func (rn *run) click(ctx context.Context, r *rand.Rand, o *opRec, who, link, decision string) {
	u, err := url.Parse(link)
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		jar, _ := cookiejar.New(nil) // a browser of its own
		hc := &http.Client{Timeout: rn.http.Timeout, Jar: jar, CheckRedirect: rn.http.CheckRedirect}
		base := rn.pick(r).url
		st, page, _ := rn.callWith(ctx, hc, "GET", base+u.Path, "", "", "")
		if retryable(st) {
			sleep(ctx, time.Duration(100+r.IntN(300))*time.Millisecond)
			continue
		}
		m := csrfRE.FindSubmatch(page)
		if st != 200 || m == nil {
			return // decided, used, or closed: nothing to press
		}
		form := url.Values{"_csrf": {string(m[1])}, "decision": {decision}}
		if decision == "reject" {
			form.Set("reason", "fault suite")
		}
		st, page, _ = rn.callWith(ctx, hc, "POST", base+u.Path, "", "application/x-www-form-urlencoded", form.Encode())
		if retryable(st) {
			sleep(ctx, time.Duration(100+r.IntN(300))*time.Millisecond)
			continue
		}
		if st == 200 && strings.Contains(string(page), "Thank you") {
			o.thank(who, decision)
		}
		if st == 200 && decision == "approve" {
			o.mu.Lock()
			o.approved = true
			o.mu.Unlock()
		}
		return
	}
}

// follow polls the status until it is terminal or ctx ends.
func (rn *run) follow(ctx context.Context, r *rand.Rand, o *opRec, until time.Time) {
	for ctx.Err() == nil && time.Now().Before(until) {
		st, b, _ := rn.call(ctx, "GET", rn.pick(r).url+"/v1/operations/"+o.key+"?wait=3", agentKey, "", "")
		if st == 200 {
			var v opView
			_ = json.Unmarshal(b, &v)
			o.sawStatus(v.Status)
			if terminal[v.Status] || v.Status == "pending_approval" && o.fate == leavePending {
				return
			}
		} else {
			sleep(ctx, 200*time.Millisecond)
		}
	}
}

// one runs operation i to its fate.
func (rn *run) one(ctx context.Context, o *opRec, mailWait time.Duration) {
	r := rand.New(rand.NewPCG(rn.seed, uint64(o.i)))
	o.fate = pickFate(r, long())
	if ctx.Err() != nil {
		return
	}
	o.started = true
	rn.prepare(ctx, r, o, r.IntN(4) == 0)
	if o.key == "" {
		return
	}
	if o.fate == cancelDraft {
		rn.agentPost(ctx, r, o, "cancel")
		rn.follow(ctx, r, o, time.Now().Add(10*time.Second))
		return
	}
	if st := rn.agentPost(ctx, r, o, "send"); st != 202 {
		return
	}
	if r.IntN(5) == 0 {
		rn.agentPost(ctx, r, o, "send") // a retried send changes nothing
	}
	if o.fate == leavePending {
		return
	}
	links := map[string]string{}
	for _, who := range []string{"grace", "ada"} {
		links[who] = rn.c.mail.waitLink(ctx, rn.c, o.key, who, mailWait)
		if links[who] == "" {
			o.noMail = true
		}
	}
	if o.fate == expireFirst {
		sleep(ctx, 65*time.Second) // past the window: the links must no longer decide
	}
	var wg sync.WaitGroup
	for j, who := range []string{"grace", "ada"} {
		if links[who] == "" {
			continue
		}
		decision := "approve"
		if o.fate == reject && j == 0 {
			decision = "reject"
		}
		for k := range 1 + r.IntN(3) {
			rr := rand.New(rand.NewPCG(rn.seed, uint64(o.i)<<16|uint64(j)<<8|uint64(k)))
			wg.Add(1)
			go func() { defer wg.Done(); rn.click(ctx, rr, o, who, links[who], decision) }()
		}
	}
	if o.fate == cancelRace {
		rr := rand.New(rand.NewPCG(rn.seed^1, uint64(o.i)))
		wg.Add(1)
		go func() { defer wg.Done(); rn.agentPost(ctx, rr, o, "cancel") }()
	}
	wg.Wait()
	rn.follow(ctx, r, o, time.Now().Add(20*time.Second))
}

// drive starts up to n operations, one every pace, until startFor has
// passed, runs them with the given concurrency, each seeded, and waits
// for them (or for ctx).
func (rn *run) drive(ctx context.Context, startFor time.Duration, n, workers int, pace time.Duration, mailWait time.Duration) {
	stopStarting := time.Now().Add(startFor)
	next := make(chan *opRec)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range next {
				rn.one(ctx, o, mailWait)
			}
		}()
	}
	for range n {
		if time.Now().After(stopStarting) {
			break
		}
		o := rn.newOp()
		select {
		case next <- o:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		if pace > 0 {
			sleep(ctx, pace)
		}
	}
	close(next)
	wg.Wait()
}

// newOp adds an operation to the run (not yet prepared).
func (rn *run) newOp() *opRec {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	i := len(rn.ops)
	o := &opRec{i: i, idem: fmt.Sprintf("f%d-%d", rn.seed, i), path: fmt.Sprintf("/items/s%d-%d", rn.seed, i)}
	rn.ops = append(rn.ops, o)
	return o
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
