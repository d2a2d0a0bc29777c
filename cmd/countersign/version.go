package main

import (
	"fmt"
	"runtime/debug"
)

// buildVersion is the module version the binary was built from, or "dev".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// versionString is what `countersign --version` prints after the name:
// the module version and the VCS commit it was built from, when the build
// recorded them (go build in a git checkout does; -buildvcs=false does not).
func versionString() string {
	v := buildVersion()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v + " (no build information)"
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
		return fmt.Sprintf("%s (commit unknown: built without VCS information; %s)", v, bi.GoVersion)
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
