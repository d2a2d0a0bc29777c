package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// debugListen starts the profiling listener when COUNTERSIGN_DEBUG_LISTEN
// names an address: Go's pprof handlers under /debug/pprof/, for measuring
// the service under load (tools/bench). It is off by default, and only a
// loopback address is accepted: a profile shows request data in flight
// (stacks, heap contents), which must never be reachable from outside.
// It has its own mux, so nothing else registered on http.DefaultServeMux
// is exposed with it.
func (m *Main) debugListen() error {
	addr := m.get("COUNTERSIGN_DEBUG_LISTEN", "")
	if addr == "" {
		return nil
	}
	if err := loopbackAddr(addr); err != nil {
		return fmt.Errorf("COUNTERSIGN_DEBUG_LISTEN: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("COUNTERSIGN_DEBUG_LISTEN: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// A CPU profile or trace runs for as long as asked (?seconds=N).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Warn("debug listener stopped", "err", err)
		}
	}()
	m.closers = append(m.closers, func() error { err := srv.Close(); <-done; return err })
	m.DebugAddr = ln.Addr().String()
	m.log.Info("debug listener (pprof) on loopback", "listen", m.DebugAddr)
	return nil
}

// loopbackAddr accepts host:port where host is a loopback IP or localhost.
func loopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q: the debug listener only binds a loopback address (127.0.0.1:6060)", addr)
}
