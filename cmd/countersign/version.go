package main

import (
	"fmt"
	"runtime/debug"
)

// Set at link time where the build cannot see the git checkout (the
// Dockerfile's build context leaves .git out):
//
//	go build -ldflags "-X main.commit=$(git rev-parse HEAD) -X main.version=v1.4.0" ./cmd/countersign
//
// The VCS stamp of go build/go install in a checkout wins over commit.
var commit, version string

// buildVersion is the module version the binary was built from, or "dev".
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// versionString is what `countersign --version` prints after the name:
// the module version and the VCS commit it was built from, when the build
// recorded them (go build in a git checkout does; -buildvcs=false does not).
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return describeBuild(buildVersion(), bi, commit)
}

// describeBuild names version v, the commit (from the build's VCS stamp,
// else linked) and whether the tree had uncommitted changes.
func describeBuild(v string, bi *debug.BuildInfo, linked string) string {
	if bi == nil {
		bi = &debug.BuildInfo{GoVersion: "go version unknown"}
		if linked == "" {
			return v + " (no build information)"
		}
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		rev = linked
	}
	if rev == "" {
		return fmt.Sprintf("%s (commit unknown: built without VCS information; build in a git checkout or pass -ldflags \"-X main.commit=…\"; %s)", v, bi.GoVersion)
	}
	out := v + " (commit " + rev
	if at != "" {
		out += ", " + at
	}
	if modified == "true" {
		out += ", modified"
	}
	return out + ", " + bi.GoVersion + ")"
}
