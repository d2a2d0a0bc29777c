package main

import "github.com/countersign/countersign/config"

// mcpEffects wires /mcp (streamable HTTP).
func (m *Main) mcpEffects(e *effects, file *config.File, dev bool) error {
	return nil
}
