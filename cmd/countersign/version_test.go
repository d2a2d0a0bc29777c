package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribeBuild(t *testing.T) {
	stamp := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8"}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, c := range []struct {
		name, linked, want string
		bi                 *debug.BuildInfo
	}{
		{"vcs stamp", "", "v1 (commit abc123, 2026-12-05T10:00:00Z, go1.26.8)", stamp("vcs.revision", "abc123", "vcs.time", "2026-12-05T10:00:00Z", "vcs.modified", "false")},
		{"modified tree", "", "v1 (commit abc123, modified, go1.26.8)", stamp("vcs.revision", "abc123", "vcs.modified", "true")},
		{"linked commit", "def456", "v1 (commit def456, go1.26.8)", stamp()},
		{"stamp wins over link", "def456", "v1 (commit abc123, go1.26.8)", stamp("vcs.revision", "abc123")},
		{"no commit", "", "v1 (commit unknown: built without VCS information; build in a git checkout or pass -ldflags \"-X main.commit=…\"; go1.26.8)", stamp()},
		{"no build info", "", "v1 (no build information)", nil},
	} {
		if got := describeBuild("v1", c.bi, c.linked); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The binaries people get: go build in a git checkout names HEAD (as go
// install does), and the Dockerfile's way (no .git, -X main.commit) names
// the commit it was given.
func TestVersionNamesTheCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	rev := strings.TrimSpace(string(head))
	top, _ := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	stampable := true
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		stampable = false // go stamps no VCS information in a git worktree (.git is a file there)
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	stamped := filepath.Join(dir, "stamped")
	run("go", "build", "-buildvcs=true", "-o", stamped, ".") // as go install does, whatever GOFLAGS says
	if out := run(stamped, "--version"); !stampable {
		t.Logf("a git worktree: go build stamps nothing here; --version = %q", out)
	} else if !strings.Contains(out, "(commit "+rev) {
		t.Errorf("go build in the checkout: --version = %q, want commit %s", out, rev)
	}
	linked := filepath.Join(dir, "linked")
	run("go", "build", "-buildvcs=false", "-ldflags=-X main.commit=0123abcd -X main.version=v9.9.9", "-o", linked, ".")
	if out := run(linked, "--version"); !strings.Contains(out, "v9.9.9 (commit 0123abcd,") {
		t.Errorf("built with -X main.commit: --version = %q", out)
	}
}
