package testkit

import (
	"context"
	"net"
	"testing"
	"time"
)

// Serve runs a server on a loopback port until t ends, and returns its
// base URL ("http://127.0.0.1:port"). listen serves on the listener until
// shutdown stops it (fiber: app.Listener and the server's Shutdown); the
// cleanup waits for listen to return, so no test leaves a server behind.
func Serve(t testing.TB, listen func(net.Listener) error, shutdown func(context.Context) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = listen(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(ctx)
		<-done
	})
	return "http://" + ln.Addr().String()
}
