package config

import "github.com/countersign/countersign/action/registry"

var (
	// knownActions are the names scopes and routes may use: every
	// registered action (action/registry), never a list of our own.
	knownActions = registry.Names()
	// targetActions are the actions that write to configured targets.
	targetActions = func() []string {
		var out []string
		for _, d := range registry.All {
			if d.Targets {
				out = append(out, d.Name)
			}
		}
		return out
	}()
)

// onTargets reports whether the action named name writes to configured
// targets: its scopes may name one, and its routes may match.target.
func onTargets(name string) bool {
	d, ok := registry.Lookup(name)
	return ok && d.Targets
}
