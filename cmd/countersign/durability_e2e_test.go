package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/redistest"
)

// serve refuses a single Redis that could lose a claim in a crash
// (appendfsync everysec) unless COUNTERSIGN_REDIS_MIN_REPLICAS=0 accepts
// the risk, and starts on one with appendfsync always.
func TestServeRefusesARedisThatCannotKeepAClaim(t *testing.T) {
	everysec := redistest.StartProcess(t, "--appendonly", "yes", "--appendfsync", "everysec")
	always := redistest.StartProcess(t, "--appendonly", "yes", "--appendfsync", "always")
	cfg := filepath.Join(t.TempDir(), "countersign.yaml")
	must(t, os.WriteFile(cfg, []byte(loopConfig(1, "console")), 0o600))
	start := func(url string, extra map[string]string) (string, error) {
		env := map[string]string{"COUNTERSIGN_CONFIG": cfg, "COUNTERSIGN_LISTEN": "127.0.0.1:0", "COUNTERSIGN_REDIS_URL": url,
			"COUNTERSIGN_LINK_KEYS": testLinkKeys}
		for k, v := range extra {
			env[k] = v
		}
		var out bytes.Buffer
		err := (&Main{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Stderr: &out}).openAndClose()
		return out.String(), err
	}
	if _, err := start(everysec.URL(), nil); err == nil || !strings.Contains(err.Error(), "appendfsync always") {
		t.Fatalf("start on a single Redis with everysec: %v", err)
	}
	if out, err := start(everysec.URL(), map[string]string{"COUNTERSIGN_REDIS_MIN_REPLICAS": "0"}); err != nil || !strings.Contains(out, "may execute twice") {
		t.Fatalf("start with the risk accepted: %v\n%s", err, out)
	}
	if _, err := start(always.URL(), nil); err != nil {
		t.Fatalf("start on a single Redis with appendfsync always: %v", err)
	}
	if _, err := start(always.URL(), map[string]string{"COUNTERSIGN_REDIS_MIN_REPLICAS": "many"}); err == nil || !strings.Contains(err.Error(), "COUNTERSIGN_REDIS_MIN_REPLICAS") {
		t.Fatalf("start with a word for a number: %v", err)
	}
	if _, err := start(always.URL(), map[string]string{"COUNTERSIGN_REDIS_WAIT_TIMEOUT": "soon"}); err == nil || !strings.Contains(err.Error(), "COUNTERSIGN_REDIS_WAIT_TIMEOUT") {
		t.Fatalf("start with a bad wait timeout: %v", err)
	}
}
