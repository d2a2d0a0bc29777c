package main

import (
	"github.com/countersign/countersign/config"
)

// emailEffects wires email.send and the email channel.
func (m *Main) emailEffects(e *effects, file *config.File, dev bool) error {
	return nil
}
