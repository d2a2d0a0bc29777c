package testkit

import (
	"testing"
	"time"
)

// WaitChange waits until cond holds, checking again whenever the channel
// that changed returns is closed (a fake server's "something happened"
// signal) and at least every 50 ms; after timeout it fails t with who is
// waiting, for what, and what seen says happened.
func WaitChange(t testing.TB, timeout time.Duration, who, what string, changed func() <-chan struct{}, cond func() bool, seen func() string) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch := changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline.C:
			t.Fatalf("%s: timed out after %s waiting for %s; calls: %s", who, timeout, what, seen())
		}
	}
}
