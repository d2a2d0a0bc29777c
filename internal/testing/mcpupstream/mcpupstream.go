// Package mcpupstream gives tests the MCP servers an upstream of the
// gateway (SPEC §12) can be: the hostile in-repo server (cmd/hostile-upstream,
// built once per test binary by Build) and the real npm servers installed
// under upstream/testdata/servers (FilesystemServer, MemoryServer).
package mcpupstream

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// RequireEnv makes a missing npm server a failure instead of a skip (CI sets
// it after npm ci succeeded).
const RequireEnv = "COUNTERSIGN_REQUIRE_UPSTREAMS"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildOut  []byte
)

// Build compiles hostile-upstream once per test binary and returns the
// path of the program.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hostile-upstream-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "hostile-upstream")
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(gobin); err != nil {
			gobin = "go"
		}
		cmd := exec.Command(gobin, "build", "-o", buildPath, "./internal/testing/mcpupstream/cmd/hostile-upstream")
		cmd.Dir = RepoRoot()
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("mcpupstream: build hostile-upstream: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}

// RepoRoot is the module's root directory (found from this file's path).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// FilesystemServer returns the command of @modelcontextprotocol/server-filesystem
// serving root.
func FilesystemServer(t testing.TB, root string) []string {
	t.Helper()
	return []string{nodePath(t), npmServer(t, "server-filesystem"), root}
}

// MemoryServer returns the command of @modelcontextprotocol/server-memory
// keeping its graph in file (through env(1), since the server reads it from
// MEMORY_FILE_PATH).
func MemoryServer(t testing.TB, file string) []string {
	t.Helper()
	node, script := nodePath(t), npmServer(t, "server-memory")
	env, err := exec.LookPath("env")
	if err != nil {
		t.Fatalf("mcpupstream: env(1): %v", err)
	}
	return []string{env, "MEMORY_FILE_PATH=" + file, node, script}
}

func nodePath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not installed")
	}
	return p
}

func npmServer(t testing.TB, pkg string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(), "upstream", "testdata", "servers", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		missing(t, "@modelcontextprotocol/"+pkg+" is not installed (npm ci in upstream/testdata/servers)")
	}
	return p
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("mcpupstream: %s, and %s=1", why, RequireEnv)
	}
	t.Skip("mcpupstream: " + why)
}
