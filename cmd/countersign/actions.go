package main

import (
	"fmt"

	"github.com/countersign/countersign/action/registry"
	"github.com/countersign/countersign/approval"
)

// registered checks that every action the wiring built is in the one list
// of actions (action/registry) that the policy file's checks and the MCP
// tools read: an action missing there could be neither allowed by a scope
// nor prepared by a tool.
func registered(actions []approval.Action) error {
	for _, a := range actions {
		if _, ok := registry.Lookup(a.Name()); !ok {
			return fmt.Errorf("action %s is wired but not registered in action/registry", a.Name())
		}
	}
	return nil
}
