package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

// TestAuditFileIsAChainThatCatchesEdits: two replicas run the loop and
// write their audit files; together the files hold every event once, in
// whole chains with signed checkpoints, and `countersign audit verify`
// says so. A hand-edited file is caught, exit 1, naming the line.
func TestAuditFileIsAChainThatCatchesEdits(t *testing.T) {
	dir := t.TempDir()
	smtp := smtptest.Start(t, smtptest.Options{})
	keys := "ck1:" + strings.Repeat("A", 43) + "="
	env := func(name string) map[string]string {
		return map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL(), "COUNTERSIGN_RECEIPT_KEYS": keys,
			"COUNTERSIGN_AUDIT_FILE": filepath.Join(dir, name)}
	}
	a := startService(t, serviceOpts{Config: loopConfig(1, "console"), Env: env("a.jsonl")})
	b := startService(t, serviceOpts{Config: loopConfig(1, "console"), Env: env("b.jsonl"), RedisURL: a.RedisURL})
	var keys2 []string
	for i := range 3 {
		srv := []*testService{a, b}[i%2]
		o := srv.prepareSend(t, emailBody)
		link := consoleLinkOf(t, o.Key, "grace", a, b)
		if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
			t.Fatalf("approve: %d", st)
		}
		srv.waitFor(t, o.Key, "succeeded")
		keys2 = append(keys2, o.Key)
	}
	resp, err := http.Get(a.PublicURL + "/.well-known/jwks.json")
	must(t, err)
	jwks, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, os.WriteFile(filepath.Join(dir, "jwks.json"), jwks, 0o600))
	time.Sleep(300 * time.Millisecond)
	a.stop(t)
	b.stop(t)

	// Whichever replica held the sealer's lease wrote the chains.
	var log []byte
	fa, fb := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	for _, n := range []string{fa, fb} {
		f, _ := os.ReadFile(n)
		log = append(log, f...)
	}
	for _, k := range keys2 {
		for _, ev := range []string{"prepared", "sent", "approval", "approved", "executing", "succeeded"} {
			if n := countLines(log, k, `"event":"`+ev+`"`); n != 1 {
				t.Fatalf("%s %s: %d lines in the audit, want 1", k, ev, n)
			}
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"audit", "verify", fa, fb, "--jwks", filepath.Join(dir, "jwks.json")},
		nil, &out, &errb, os.LookupEnv); code != 0 || !strings.Contains(out.String(), "whole:") ||
		strings.Contains(out.String(), " 0 signed checkpoints") {
		t.Fatalf("verify: exit %d\n%s%s", code, out.String(), errb.String())
	}

	// Someone rewrites who approved: caught.
	for _, f := range []string{fa, fb} {
		raw, _ := os.ReadFile(f)
		must(t, os.WriteFile(f, bytes.Replace(raw, []byte(`"actor":"approver:grace"`), []byte(`"actor":"approver:sam"`), 1), 0o600))
	}
	out.Reset()
	if code := run(context.Background(), []string{"audit", "verify", "--jwks", filepath.Join(dir, "jwks.json"), fa, fb},
		nil, &out, &errb, os.LookupEnv); code != 1 || !strings.Contains(out.String(), "BROKEN") || !strings.Contains(out.String(), "edited") {
		t.Fatalf("edited file: exit %d\n%s", code, out.String())
	}
}

func countLines(log []byte, needles ...string) int {
	n := 0
	for _, l := range strings.Split(string(log), "\n") {
		ok := true
		for _, s := range needles {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			n++
		}
	}
	return n
}
