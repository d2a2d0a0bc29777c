package store

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
)

// GoroutinesIn counts the goroutines whose stack has fn in it (for the
// tests of store_test too).
var GoroutinesIn = goroutinesIn

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

// close waits for the hub's readers: one held while it signals a change
// (the test holds the waiters' lock) keeps close from returning until it
// is let go.
func TestHubCloseWaitsForItsReaders(t *testing.T) {
	_, rdb, stop, err := Embedded() // pub/sub is server-wide: keep it off a shared Redis
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	defer rdb.Close()
	before := goroutinesIn("store.(*hub)")
	h := newHub(rdb, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, unwatch, err := h.watch(ctx, "op_held"); err != nil {
		t.Fatal(err)
	} else {
		defer unwatch()
	}
	h.mu.Lock()
	locked := true
	defer func() {
		if locked {
			h.mu.Unlock()
		}
	}()
	if err := rdb.Publish(ctx, changesChannel, "op_held").Err(); err != nil {
		t.Fatal(err)
	}
	for goroutinesIn("store.(*hub).signal") == 0 {
		if ctx.Err() != nil {
			t.Fatal("the reader never signalled the change")
		}
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- h.close() }()
	select {
	case err := <-closed:
		t.Fatalf("close returned (%v) while a reader still ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	h.mu.Unlock()
	locked = false
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := goroutinesIn("store.(*hub)"); n != before {
		t.Fatalf("%d hub goroutines after close, %d before", n, before)
	}
}
