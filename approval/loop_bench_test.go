package approval_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/redis/go-redis/v9"
)

// trips counts the commands and pipelines a client sends: round trips.
type trips struct{ n atomic.Int64 }

func (t *trips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (t *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { t.n.Add(1); return next(ctx, cmd) }
}
func (t *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { t.n.Add(1); return next(ctx, cmds) }
}

// BenchmarkLoop is the whole life of one operation through the service,
// one step after another: prepare, send, the worker's delivery of the
// link, the approver opening it and approving, the worker's execution, and
// the agent's read of the outcome. It reports the store's round trips per
// loop and this process's CPU time per loop beside the time (the queue's
// own reads and the page's HTTP are not in it: see tools/bench for those).
func BenchmarkLoop(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	var t trips
	rdb.AddHook(&t)
	h := newHarnessOn(b, rdb, opts{})
	input := json.RawMessage(`{"n":1,"note":"benchmark"}`)
	b.ReportAllocs()
	t.n.Store(0)
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		op, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: input})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.svc.Send(bg, h.agent, op.Key); err != nil {
			b.Fatal(err)
		}
		if err := h.svc.Reconcile(bg, op.Ref()); err != nil {
			b.Fatal(err)
		}
		h.inbox.mu.Lock()
		link := h.inbox.notices[len(h.inbox.notices)-1].Link
		h.inbox.notices = h.inbox.notices[:0]
		h.inbox.mu.Unlock()
		select {
		case <-h.inbox.got:
		default:
		}
		v, err := h.svc.OpenLink(bg, tokenOf(link))
		if err != nil || v.Problem != approval.LinkOK {
			b.Fatalf("open: %v %v", v.Problem, err)
		}
		if _, res, err := h.svc.DecideOpened(bg, v, true, ""); err != nil || res.Outcome != approval.DecideApproved {
			b.Fatalf("approve: %v %v", res.Outcome, err)
		}
		if err := h.svc.Reconcile(bg, op.Ref()); err != nil {
			b.Fatal(err)
		}
		if got, err := h.svc.Get(bg, h.agent, op.Key); err != nil || got.Status != approval.StatusSucceeded {
			b.Fatalf("outcome: %v %v", got, err)
		}
	}
	b.ReportMetric(float64(t.n.Load())/float64(b.N), "trips/op")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime is the user and system time this process has used (the
// service's, the client's and the harness's; not Redis's).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
