package config

import (
	"github.com/countersign/countersign/action"
	"github.com/countersign/countersign/action/registry"
)

var (
	// knownActions are the names scopes and routes may use: every
	// registered action (action/registry), never a list of our own.
	knownActions = registry.Names()
	// targetActions are the actions that write to configured targets.
	targetActions = actionsWhere(func(d action.Descriptor) bool { return d.Targets })
	// toolCallActions are the actions that stand for a host's tool call.
	toolCallActions = actionsWhere(func(d action.Descriptor) bool { return d.ToolCalls })
)

func actionsWhere(keep func(action.Descriptor) bool) []string {
	var out []string
	for _, d := range registry.All {
		if keep(d) {
			out = append(out, d.Name)
		}
	}
	return out
}

// onTargets reports whether the action named name writes to configured
// targets: its scopes may name one, and its routes may match.target.
func onTargets(name string) bool {
	d, ok := registry.Lookup(name)
	return ok && d.Targets
}

// onToolCalls reports whether the action named name stands for an agent
// host's tool call: its routes may match.tool.
func onToolCalls(name string) bool {
	d, ok := registry.Lookup(name)
	return ok && d.ToolCalls
}
