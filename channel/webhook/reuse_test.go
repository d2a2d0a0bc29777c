package webhook

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConnectionsAreKeptForTheNextNotices: notices posted several at a
// time to one receiver reuse the connections the first ones opened
// (net/http alone keeps two per host, so most would dial again).
func TestConnectionsAreKeptForTheNextNotices(t *testing.T) {
	const inFlight = 8
	var opened atomic.Int32
	var arrived sync.WaitGroup
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release // hold every post of the round until all have arrived: each has a connection of its own
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	w := New([]Hook{{Name: "ops", URL: srv.URL}})
	for round := range 3 {
		arrived.Add(inFlight)
		var done sync.WaitGroup
		for range inFlight {
			done.Add(1)
			go func() {
				defer done.Done()
				if _, err := w.Notify(context.Background(), notice("ops")); err != nil {
					t.Error(err)
				}
			}()
		}
		arrived.Wait()
		for range inFlight {
			release <- struct{}{}
		}
		done.Wait()
		if got := opened.Load(); got != inFlight {
			t.Fatalf("after round %d: %d connections opened, want the first round's %d", round+1, got, inFlight)
		}
	}
}
