package main

import "github.com/countersign/countersign/config"

// webhookEffects wires the webhook channel.
func (m *Main) webhookEffects(e *effects, file *config.File, dev bool) error {
	return nil
}
