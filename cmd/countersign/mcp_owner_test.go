package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// goroutinesIn counts the goroutines whose stack is in function fn
// ("main.probeService").
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
		if strings.Contains(g, fn+"(") {
			count++
		}
	}
	return count
}

// heldWriter holds the write of a line containing match until release is
// closed (other lines pass), so that whoever logs it cannot return before.
type heldWriter struct {
	match   string
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *heldWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.match) {
		w.once.Do(func() { close(w.held) })
		<-w.release
	}
	return len(p), nil
}

// The probe of countersign mcp belongs to runMCP: when the host closes
// stdin while the probe is still busy (here: logging that it connected),
// runMCP returns only once the probe has.
func TestMCPProbeStopsWithRunMCP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"operations": []}`)
	}))
	defer srv.Close()
	env := func(k string) (string, bool) {
		switch k {
		case "COUNTERSIGN_URL":
			return srv.URL, true
		case "COUNTERSIGN_API_KEY":
			return "cs_test_probe_owner_key_0123456789", true
		}
		return "", false
	}
	stderr := &heldWriter{match: "connected to countersign", held: make(chan struct{}), release: make(chan struct{})}
	stdin, host := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- runMCP(context.Background(), env, stdin, io.Discard, stderr) }()
	<-stderr.held
	host.Close() // the host goes away while the probe is busy
	select {
	case err := <-done:
		t.Fatalf("runMCP returned (%v) while its probe still ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(stderr.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := goroutinesIn("main.probeService"); n != 0 {
		t.Fatalf("%d probes still run after runMCP returned", n)
	}
}
