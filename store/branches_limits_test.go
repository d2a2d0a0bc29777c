package store_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/audit"
)

// Branches of the scripts that are not transitions of an operation:
// advance (the audit chain's head), lease (the sealer's lease), limit
// (failed link attempts) and rate (a principal's requests).

// batch is the one audit chain holding raw events.
func (f *fixture) batch() audit.Batch {
	f.t.Helper()
	bs, err := f.st.AuditPending(bg, 100)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []audit.Batch
	for _, b := range bs {
		if len(b.Raw) > 0 || b.Head.ID != "" {
			out = append(out, b)
		}
	}
	if len(out) != 1 {
		f.t.Fatalf("chains in use: %+v", bs)
	}
	return out[0]
}

func TestAdvanceScriptBranchesMoveTheHeadOnlyFromWhereItWasRead(t *testing.T) {
	f := newFixture(t)
	f.draft("agent", 10)
	f.draft("agent", 10)
	b := f.batch()
	if len(b.Raw) != 2 || b.Head.ID != "" {
		t.Fatalf("before: head %+v, %d raw", b.Head, len(b.Raw))
	}
	to := audit.Head{ID: b.Raw[1].ID, Seq: 2, Hash: "sha256:abc", LastCheckpoint: f.now, Since: 2}

	// Someone else moved it: nothing changes.
	if ok, err := f.st.AuditAdvance(bg, b.Chain, audit.Head{ID: b.Raw[0].ID}, to); err != nil || ok {
		t.Fatalf("from a head that is not the current one: %v %v", ok, err)
	}
	if again := f.batch(); again.Head.ID != "" || len(again.Raw) != 2 {
		t.Fatalf("a refused advance moved the head: %+v, %d raw", again.Head, len(again.Raw))
	}
	if ok, err := f.st.AuditAdvance(bg, b.Chain, b.Head, to); err != nil || !ok {
		t.Fatalf("advance: %v %v", ok, err)
	}
	after := f.batch()
	if h := after.Head; h.ID != to.ID || h.Seq != 2 || h.Hash != to.Hash || h.Since != 2 || !h.LastCheckpoint.Equal(f.now) {
		t.Fatalf("head after %+v, want %+v", h, to)
	}
	if len(after.Raw) != 0 {
		t.Fatalf("%d raw events left after the head", len(after.Raw))
	}
	if n := f.rdb.XLen(bg, f.one("cs:*:a")).Val(); n != 0 {
		t.Fatalf("the sealed events were not dropped: %d left", n)
	}
	// The next event is kept, and a stale sealer cannot move the head back.
	f.draft("agent", 10)
	if n := f.rdb.XLen(bg, f.one("cs:*:a")).Val(); n != 1 {
		t.Fatalf("events after a new one: %d", n)
	}
	if ok, err := f.st.AuditAdvance(bg, b.Chain, b.Head, audit.Head{ID: "1-0", Seq: 1}); err != nil || ok {
		t.Fatalf("stale sealer: %v %v", ok, err)
	}
	if h := f.batch().Head; h.ID != to.ID || h.Seq != 2 {
		t.Fatalf("a stale sealer moved the head to %+v", h)
	}
}

func TestLeaseScriptBranches(t *testing.T) {
	f := newFixture(t)
	if ok, err := f.st.AuditLease(bg, "a", time.Minute); err != nil || !ok {
		t.Fatalf("take a free lease: %v %v", ok, err)
	}
	if ok, err := f.st.AuditLease(bg, "b", time.Minute); err != nil || ok {
		t.Fatalf("take a held lease: %v %v", ok, err)
	}
	if ok, err := f.st.AuditLease(bg, "a", time.Minute); err != nil || !ok {
		t.Fatalf("its holder takes it again: %v %v", ok, err)
	}
	if err := f.st.AuditRelease(bg, "b"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := f.st.AuditLease(bg, "b", time.Minute); ok {
		t.Fatal("another holder released the lease")
	}
	if err := f.st.AuditRelease(bg, "a"); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.st.AuditLease(bg, "b", time.Minute); err != nil || !ok {
		t.Fatalf("after its release: %v %v", ok, err)
	}

	// On an operation: the other holder learns how long it waits; a renewal
	// or a drop by anyone but the holder does nothing.
	op := f.pending()
	if ok, _, err := f.st.Lease(bg, op.Ref(), "x", "a", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	ok, wait, err := f.st.Lease(bg, op.Ref(), "x", "b", time.Minute)
	if err != nil || ok || wait <= 50*time.Second || wait > time.Minute {
		t.Fatalf("held by another: ok=%v wait=%s err=%v", ok, wait, err)
	}
	if ok, err := f.st.RenewLease(bg, op.Ref(), "x", "b", time.Hour); err != nil || ok {
		t.Fatalf("renewed by another: %v %v", ok, err)
	}
	if err := f.st.Unlease(bg, op.Ref(), "x", "b"); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := f.st.Lease(bg, op.Ref(), "x", "b", time.Minute); ok {
		t.Fatal("dropped by another")
	}
	if ok, err := f.st.RenewLease(bg, op.Ref(), "x", "a", time.Hour); err != nil || !ok {
		t.Fatalf("renewed by its holder: %v %v", ok, err)
	}
	if _, wait, _ := f.st.Lease(bg, op.Ref(), "x", "b", time.Minute); wait <= time.Minute {
		t.Fatalf("renewal did not lengthen the lease: %s", wait)
	}
	if err := f.st.Unlease(bg, op.Ref(), "x", "a"); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.st.RenewLease(bg, op.Ref(), "x", "a", time.Hour); err != nil || ok {
		t.Fatalf("renewal of a free lease: %v %v", ok, err)
	}
	ok, taken, got, err := f.st.LeaseAndGet(bg, op.Ref(), "x", "b", time.Minute)
	if err != nil || !ok || taken != 0 || got == nil || got.Key != op.Key {
		t.Fatalf("take and read: %v %s %v %v", ok, taken, got, err)
	}
	// Its retried take (the reply was lost) reads as taken, with the operation.
	if ok, _, got, err := f.st.LeaseAndGet(bg, op.Ref(), "x", "b", time.Minute); err != nil || !ok || got == nil || got.Key != op.Key {
		t.Fatalf("retried take: %v %v %v", ok, got, err)
	}
	if ok, _, got, err := f.st.LeaseAndGet(bg, op.Ref(), "x", "a", time.Minute); err != nil || ok || got != nil {
		t.Fatalf("take of a held lease: %v %v %v", ok, got, err)
	}
}

func TestLimitScriptBranchesCountInAFixedWindow(t *testing.T) {
	f := newFixture(t)
	for i := 1; i <= 3; i++ {
		ok, wait, err := f.st.Allow(bg, "ip:1", 2, time.Minute)
		if err != nil || ok != (i <= 2) || wait <= 50*time.Second || wait > time.Minute {
			t.Fatalf("attempt %d: ok=%v wait=%s err=%v", i, ok, wait, err)
		}
	}
	if n, _, err := f.st.Count(bg, "ip:1"); err != nil || n != 3 {
		t.Fatalf("count %d %v", n, err)
	}
	if ok, _, _ := f.st.Allow(bg, "ip:2", 2, time.Minute); !ok {
		t.Fatal("another bucket shares the count")
	}
	// The window is fixed from the first attempt: it ends, and counting
	// starts again.
	for range 3 {
		_, _, _ = f.st.Allow(bg, "ip:3", 1, 300*time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, _, _ := f.st.Count(bg, "ip:3")
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the window never ended: count %d", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ok, _, _ := f.st.Allow(bg, "ip:3", 1, 300*time.Millisecond); !ok {
		t.Fatal("a new window refused its first attempt")
	}
}

func TestRateScriptBranches(t *testing.T) {
	f := newFixture(t)
	keys := f.keys()
	for range 3 {
		if err := f.st.Rate(bg, "agent", 0); err != nil {
			t.Fatalf("no limit: %v", err)
		}
	}
	if f.keys() != keys {
		t.Fatal("an unlimited principal was counted")
	}
	for i := 1; i <= 3; i++ {
		err := f.st.Rate(bg, "agent", 2)
		if i <= 2 && err != nil || i == 3 && code(err) != approval.CodeRateLimited {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	counters := f.one("cs:*:p:agent")
	if n := f.counter("agent", "rn"); n != 3 {
		t.Fatalf("counted %d", n)
	}
	// The wait is what is left of the window on the server's clock.
	server := f.rdb.Time(bg).Val()
	f.rdb.HSet(bg, counters, "rw", strconv.FormatInt(server.Add(-59*time.Second).UnixMilli(), 10))
	err := f.st.Rate(bg, "agent", 2)
	var e *approval.Error
	if code(err) != approval.CodeRateLimited || !errors.As(err, &e) || e.Details["retry_after_seconds"] != 1 {
		t.Fatalf("a second before the window ends: %v", err)
	}
	// A window that ended starts again with this request.
	f.rdb.HSet(bg, counters, "rw", strconv.FormatInt(server.Add(-61*time.Second).UnixMilli(), 10))
	if err := f.st.Rate(bg, "agent", 2); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	if n := f.counter("agent", "rn"); n != 1 {
		t.Fatalf("a new window counts %d", n)
	}
}
