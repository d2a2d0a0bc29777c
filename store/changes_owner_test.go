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
func hubGoroutines() int {
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
		if strings.Contains(g, "store.(*hub).start.func") {
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
