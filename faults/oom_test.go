//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestRedisOOM: Redis at maxmemory with noeviction. Prepares are refused
// cleanly (503 within 5 s), reads keep working (status, list, the approval
// page), /readyz says not ready, nothing is half-written (an idempotency
// key whose create was refused binds nothing), and everything works again
// once memory frees.
func TestRedisOOM(t *testing.T) {
	c := startCluster(t, clusterOpts{redisArgs: []string{"--maxmemory-policy", "noeviction"}})
	rn := newRun(c, uint64(seed()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := rand.New(rand.NewPCG(uint64(seed()), 13))
	// Some operations before: decided ones, and pending ones whose pages
	// must stay readable.
	rn.drive(ctx, 2*time.Second, 5000, 6, 100*time.Millisecond, 20*time.Second)
	var pending []*opRec
	for range 3 {
		o := rn.sendOne(ctx, r)
		o.fate = leavePending
		pending = append(pending, o)
	}
	for _, o := range pending {
		c.mail.waitLink(ctx, c, o.key, "grace", 30*time.Second)
	}

	if out, err := c.redisCmd("CONFIG", "SET", "maxmemory", "1"); err != nil || out != "OK" {
		t.Fatalf("CONFIG SET maxmemory: %v %s", err, out)
	}
	oomFor := 3 * time.Second
	if long() {
		oomFor = 20 * time.Second
	}
	var refused []*opRec
	readsOK, readsBad, readyBad := 0, 0, 0
	until := time.Now().Add(oomFor)
	for time.Now().Before(until) {
		// a new operation: refused (503), or, if it passes, acknowledged
		o := rn.newOp()
		o.started, o.fate = true, leavePending
		body := fmt.Sprintf(`{"action":"http.request","input":{"target":"items","method":"PATCH","path":%q,"body":{"qty":1}},"idempotency_key":%q}`, o.path, o.idem)
		st, b, _ := rn.call(ctx, "POST", rn.pick(r).url+"/v1/operations", agentKey, "application/json", body)
		switch st {
		case 201, 200:
			var v opView
			_ = json.Unmarshal(b, &v)
			o.key = v.Key
		case 503:
			refused = append(refused, o)
		default:
			t.Errorf("prepare under OOM: %d %s", st, b)
		}
		// reads of what exists
		p := pending[r.IntN(len(pending))]
		for _, u := range []string{"/v1/operations/" + p.key, "/v1/operations?status=pending_approval"} {
			if st, b, _ := rn.call(ctx, "GET", rn.pick(r).url+u, agentKey, "", ""); st == 200 {
				readsOK++
			} else {
				readsBad++
				t.Logf("read %s under OOM: %d %s", u, st, b)
			}
		}
		if l := c.mail.link(c, p.key, "grace"); l != "" {
			if st, _, _ := rn.call(ctx, "GET", onReplica(l, rn.pick(r)), "", "", ""); st == 200 {
				readsOK++
			} else {
				readsBad++
				t.Logf("approval page under OOM: %d", st)
			}
		}
		// not ready, and said to refuse writes (OOM), not to be unreachable
		if st, b, _ := rn.call(ctx, "GET", rn.pick(r).url+"/readyz", "", "", ""); st != 503 || !strings.Contains(string(b), `"redis_error":"OOM"`) {
			readyBad++
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := c.redisCmd("CONFIG", "SET", "maxmemory", "0"); err != nil || out != "OK" {
		t.Fatalf("CONFIG SET maxmemory 0: %v %s", err, out)
	}
	// Recovery: every refused idempotency key is free (another body under
	// it is a new operation, 201, not 200 or 422 pointing at nothing).
	halfWritten := 0
	for _, o := range refused {
		for ctx.Err() == nil {
			body := fmt.Sprintf(`{"action":"http.request","input":{"target":"items","method":"PATCH","path":%q,"body":{"qty":2}},"idempotency_key":%q}`, o.path, o.idem)
			st, b, _ := rn.call(ctx, "POST", rn.pick(r).url+"/v1/operations", agentKey, "application/json", body)
			if retryable(st) {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			if st != 201 {
				halfWritten++
				t.Logf("op %d: its key after a refused create: %d %s", o.i, st, b)
			}
			var v opView
			_ = json.Unmarshal(b, &v)
			o.key = v.Key
			break
		}
	}
	// and the service runs operations to the end again
	rn.drive(ctx, 2*time.Second, 5000, 6, 100*time.Millisecond, 20*time.Second)
	res := rn.settle(ctx, "redis OOM (maxmemory, noeviction)", 20*time.Second)
	res.Notes = append(res.Notes, fmt.Sprintf("under OOM: %d prepares refused with 503, %d reads answered, %d reads refused, %d readiness answers other than 503 refusing_writes OOM; %d refused creates left a binding",
		len(refused), readsOK, readsBad, readyBad, halfWritten))
	record(res)
	res.check(t)
	if len(refused) == 0 {
		t.Error("no prepare was refused: Redis never ran out of memory")
	}
	if readsBad > 0 || readyBad > 0 || halfWritten > 0 {
		t.Errorf("under OOM: %d reads refused, %d readiness answers other than 503 refusing_writes OOM, %d refused creates left a binding", readsBad, readyBad, halfWritten)
	}
}
