package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
)

// hubGoroutines counts the goroutines of change hubs: the readers of the
// subscriptions and the one that declares them ready.
func hubGoroutines() int { return store.GoroutinesIn("store.(*hub).start.func") }

// The change hub owns its subscribers: Close returns only once they have
// returned, and a watch after Close is refused rather than subscribing
// again.
func TestChangeHubSubscribersStopOnClose(t *testing.T) {
	before := hubGoroutines()
	st := store.New(redistest.Start(t).Client(t), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, stop, err := st.Changes(ctx, "op_owner")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if n := hubGoroutines(); n <= before {
		t.Fatalf("%d hub goroutines while watching, %d before", n, before)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if n := hubGoroutines(); n != before {
		t.Fatalf("%d hub goroutines after Close, %d before", n, before)
	}
	if _, _, err := st.Changes(ctx, "op_owner"); approval.ErrorCode(err) != approval.CodeUnavailable {
		t.Fatalf("watch after Close: %v, want unavailable", err)
	}
	if n := hubGoroutines(); n != before {
		t.Fatalf("a watch after Close started %d hub goroutines", n-before)
	}
}

// RealTimeTTL's stop returns once its goroutine has: Embedded closes the
// miniredis right after.
func TestRealTimeTTLStopWaits(t *testing.T) {
	before := store.GoroutinesIn("store.RealTimeTTL.func")
	_, rdb, stop, err := store.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if n := store.GoroutinesIn("store.RealTimeTTL.func"); n != before+1 {
		t.Fatalf("%d fast-forwarders running, want %d", n, before+1)
	}
	stop()
	if n := store.GoroutinesIn("store.RealTimeTTL.func"); n != before {
		t.Fatalf("%d fast-forwarders after stop, want %d", n, before)
	}
}
