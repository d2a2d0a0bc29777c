package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var devAuditRE = regexp.MustCompile(`audit: +written to (\S+) \(COUNTERSIGN_AUDIT_FILE sets where\)`)

// TestDevelopmentAuditFile: development mode writes its audit to a file of
// its own by default and names it in the banner; the terminal keeps the
// banner and the approval notices, with no audit line among them.
func TestDevelopmentAuditFile(t *testing.T) {
	srv := startService(t, serviceOpts{Env: map[string]string{"COUNTERSIGN_AUDIT_FILE": ""}})
	m := devAuditRE.FindStringSubmatch(srv.Stderr.String())
	if m == nil {
		t.Fatalf("the banner does not say where the audit goes:\n%s", srv.Stderr.String())
	}
	path := m[1]
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(path)) })
	if !filepath.IsAbs(path) || path != srv.AuditPath {
		t.Fatalf("audit path %q, Main says %q", path, srv.AuditPath)
	}
	o := srv.prepareSend(t, emailBody)
	link := srv.consoleLink(t, o.Key, "you")
	newBrowser().decide(t, link, "approve", "")
	srv.waitFor(t, o.Key, "succeeded")

	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), o.Key) && strings.Contains(string(b), `"approved"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit file has no approval of %s:\n%s", o.Key, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(srv.Stderr.String(), `{"audit"`) {
		t.Errorf("audit lines on the terminal:\n%s", srv.Stderr.String())
	}
}
