package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestDebugListenerIsOffByDefaultAndLoopbackOnly(t *testing.T) {
	srv := startService(t, serviceOpts{})
	if srv.DebugAddr != "" {
		t.Fatalf("debug listener on %s without COUNTERSIGN_DEBUG_LISTEN", srv.DebugAddr)
	}
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "10.1.2.3:6060", "example.com:6060", "6060"} {
		if err := loopbackAddr(addr); err == nil {
			t.Errorf("%s accepted as a debug address", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:0", "127.0.0.2:1"} {
		if err := loopbackAddr(addr); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	m := &Main{Env: func(k string) (string, bool) {
		if k == "COUNTERSIGN_DEBUG_LISTEN" {
			return "0.0.0.0:0", true
		}
		return "", false
	}, Stderr: io.Discard}
	if err := m.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "COUNTERSIGN_DEBUG_LISTEN") {
		t.Fatalf("serve with a public debug address: %v", err)
	}
	_ = m.Close()
}

func TestDebugListenerServesProfiles(t *testing.T) {
	srv := startService(t, serviceOpts{Env: map[string]string{"COUNTERSIGN_DEBUG_LISTEN": "127.0.0.1:0"}})
	if !strings.HasPrefix(srv.DebugAddr, "127.0.0.1:") {
		t.Fatalf("debug address %q", srv.DebugAddr)
	}
	// Its own client: these pages are not the API that openapi.json describes.
	c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + srv.DebugAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("goroutine profile: %d %.200s", resp.StatusCode, body)
	}
	// Nothing of the service is on it, and it is not on the service's port.
	if resp, err := c.Get("http://" + srv.DebugAddr + "/v1/operations"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("/v1/operations on the debug listener: %d", resp.StatusCode)
		}
	}
	if status, _ := srv.call(t, "GET", "/debug/pprof/", "", ""); status != 404 {
		t.Fatalf("/debug/pprof/ on the service: %d", status)
	}
}
