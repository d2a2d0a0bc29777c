// Package registry is the one list of actions: the policy file's checks
// (config), the MCP tools (mcpserver) and the wiring (cmd/countersign) read
// it. Adding an action is its package, exporting its action.Descriptor,
// and one line in All.
package registry

import (
	"github.com/countersign/countersign/action"
	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/action/hosttool"
	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
)

// All lists every action, in the order error messages and the MCP
// instructions name them.
var All = []action.Descriptor{
	email.Descriptor,
	slackpost.Descriptor,
	slackpost.DeleteDescriptor,
	httpreq.Descriptor,
	hosttool.Descriptor,
	mcpcall.Descriptor,
	// allowance.grant is the domain's own action (approval/allowance.go),
	// asked for with the request_allowance tool, which prepares nothing.
	{Name: approval.GrantAction},
}

// Lookup returns the action named name.
func Lookup(name string) (action.Descriptor, bool) {
	for _, d := range All {
		if d.Name == name {
			return d, true
		}
	}
	return action.Descriptor{}, false
}

// Names lists the names of every action, in the order of All.
func Names() []string {
	out := make([]string, len(All))
	for i, d := range All {
		out[i] = d.Name
	}
	return out
}
