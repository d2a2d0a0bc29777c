package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAuditHeadCatchesACutEnd: through the real admin endpoint and the
// CLI. A log file checked against GET /v1/admin/audit/head is whole; the
// same file with its last lines cut is still whole alone but refused
// against the head (URL or saved file); a saved head older than the file
// is refused, a tampered one too.
func TestAuditHeadCatchesACutEnd(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "audit.jsonl")
	srv := startService(t, serviceOpts{Env: map[string]string{"COUNTERSIGN_DEV_OPERATOR_KEY": testOperatorKey,
		"COUNTERSIGN_AUDIT_FILE": file, "COUNTERSIGN_RECEIPT_KEYS": "ck1:" + strings.Repeat("B", 43) + "="}})
	env := map[string]string{"COUNTERSIGN_OPERATOR_KEY": testOperatorKey}
	headURL := srv.PublicURL + "/v1/admin/audit/head"

	// The head is the operators': an agent's key does not open it.
	if st, _ := srv.call(t, "GET", "/v1/admin/audit/head", srv.APIKey, ""); st != 401 {
		t.Fatalf("agent key: %d, want 401", st)
	}
	prepare := func(n int) {
		for range n {
			if st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, emailBody); st != 201 {
				t.Fatalf("prepare: %d %s", st, b)
			}
		}
	}
	prepare(4)
	settled := func() []byte {
		t.Helper()
		var last []byte
		for range 100 {
			time.Sleep(100 * time.Millisecond)
			b, _ := os.ReadFile(file)
			if len(b) > 0 && bytes.Equal(b, last) {
				return b
			}
			last = b
		}
		t.Fatal("the audit file did not settle")
		return nil
	}
	log := settled()

	st, headJSON := srv.call(t, "GET", "/v1/admin/audit/head", testOperatorKey, "")
	if st != 200 {
		t.Fatalf("GET /v1/admin/audit/head: %d %s", st, headJSON)
	}
	var head struct {
		Head   string `json:"head"`
		Chains []struct {
			Seq int64 `json:"seq"`
		} `json:"chains"`
	}
	must(t, json.Unmarshal(headJSON, &head))
	if len(strings.Split(head.Head, ".")) != 3 || len(head.Chains) == 0 {
		t.Fatalf("head: %s", headJSON)
	}
	savedHead := filepath.Join(dir, "head.json")
	must(t, os.WriteFile(savedHead, headJSON, 0o600))

	if code, out, errs := runCLI(t, env, "audit", "verify", file, "--head", headURL); code != 0 || !strings.Contains(out, "the files reach it") {
		t.Fatalf("whole log against the live head: exit %d\n%s%s", code, out, errs)
	}

	// The last two entries cut: whole alone, refused against the head.
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	cut := filepath.Join(dir, "cut.jsonl")
	must(t, os.WriteFile(cut, []byte(strings.Join(lines[:len(lines)-2], "\n")+"\n"), 0o600))
	if code, out, _ := runCLI(t, env, "audit", "verify", cut, "--jwks", srv.PublicURL+"/.well-known/jwks.json"); code != 0 ||
		!strings.Contains(out, "not that nothing was cut") {
		t.Fatalf("the cut file alone: exit %d\n%s", code, out)
	}
	for _, h := range []string{headURL, savedHead} {
		if code, out, errs := runCLI(t, env, "audit", "verify", cut, "--head", h, "--jwks", srv.PublicURL+"/.well-known/jwks.json"); code != 1 ||
			!strings.Contains(out, "BROKEN") || !strings.Contains(out, ": cut (") {
			t.Fatalf("the cut file against %s: exit %d\n%s%s", h, code, out, errs)
		}
	}

	// More events: the saved head is now older than the file.
	prepare(2)
	settled()
	if code, out, _ := runCLI(t, env, "audit", "verify", file, "--head", savedHead, "--jwks", srv.PublicURL+"/.well-known/jwks.json"); code != 1 ||
		!strings.Contains(out, "head_older") {
		t.Fatalf("a head older than the file: exit %d\n%s", code, out)
	}
	if code, out, errs := runCLI(t, env, "audit", "verify", file, "--head", headURL); code != 0 {
		t.Fatalf("the grown log against the live head: exit %d\n%s%s", code, out, errs)
	}

	// A tampered head: its signature no longer verifies.
	parts := strings.Split(head.Head, ".")
	parts[2] = strings.Repeat("A", len(parts[2]))
	bad := filepath.Join(dir, "bad-head.jws")
	must(t, os.WriteFile(bad, []byte(strings.Join(parts, ".")), 0o600))
	if code, out, _ := runCLI(t, env, "audit", "verify", file, "--head", bad, "--jwks", srv.PublicURL+"/.well-known/jwks.json"); code != 1 ||
		!strings.Contains(out, "does not verify") {
		t.Fatalf("a tampered head: exit %d\n%s", code, out)
	}
}
