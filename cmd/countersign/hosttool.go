package main

import (
	"github.com/countersign/countersign/action/hosttool"
	"github.com/countersign/countersign/config"
)

// hostToolEffects wires host.tool_call (SPEC §13): it needs no settings
// and runs nothing, so it is always there; the scope host.tool_call
// decides who may use it.
func (m *Main) hostToolEffects(e *effects, _ *config.File, _ bool) error {
	e.actions = append(e.actions, hosttool.New())
	return nil
}
