package store_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
)

// hubGoroutines counts the goroutines of change hubs: the readers of the
// subscriptions and the one that declares them ready.
func hubGoroutines() int { return goroutinesIn("store.(*hub).start.func") }

// goroutinesIn counts the goroutines whose stack has fn in it.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			count++
		}
	}
	return count
}

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
	before := goroutinesIn("store.RealTimeTTL.func")
	_, rdb, stop, err := store.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if n := goroutinesIn("store.RealTimeTTL.func"); n != before+1 {
		t.Fatalf("%d fast-forwarders running, want %d", n, before+1)
	}
	stop()
	if n := goroutinesIn("store.RealTimeTTL.func"); n != before {
		t.Fatalf("%d fast-forwarders after stop, want %d", n, before)
	}
}
