package config

import (
	"fmt"

	"github.com/countersign/countersign/action"
	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/action/registry"
)

var (
	// knownActions are the names scopes and routes may use: every
	// registered action (action/registry), never a list of our own.
	knownActions = registry.Names()
	// scopeNames are the scopes as written, for error messages: an
	// action's name, or "BASE:NAME" for one allowed per target (mcp:NAME).
	scopeNames = func() []string {
		var out []string
		for _, d := range registry.All {
			if d.ScopeBase != "" {
				out = append(out, d.ScopeBase+":NAME")
			} else {
				out = append(out, d.Name)
			}
		}
		return out
	}()
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

// checkTarget says what is wrong with a route's match.target for its
// match.action, or "": mcp.call's targets are the upstreams, the other
// actions' the HTTP targets, and a route naming no one action may name
// either.
func (f *File) checkTarget(act, name string) string {
	switch {
	case act == mcpcall.Name:
		if !f.hasUpstream(name) {
			return fmt.Sprintf("match.target %q is not an upstream", name)
		}
	case onTargets(act):
		if !f.hasTarget(name) {
			return fmt.Sprintf("match.target %q is not a target", name)
		}
	case f.hasTarget(name) || f.hasUpstream(name):
	case len(f.Upstreams) == 0:
		return fmt.Sprintf("match.target %q is not a target", name)
	default:
		return fmt.Sprintf("match.target %q is neither a target nor an upstream", name)
	}
	return ""
}
