package main

import "github.com/countersign/countersign/config"

// httpEffects wires http.request and its targets.
func (m *Main) httpEffects(e *effects, file *config.File, dev bool) error {
	return nil
}
