package main

import (
	"fmt"

	"github.com/countersign/countersign/channel/webhook"
	"github.com/countersign/countersign/config"
)

// webhookEffects wires the webhook channel: the webhooks of the policy
// file, their secrets resolved from the environment.
func (m *Main) webhookEffects(e *effects, file *config.File, dev bool) error {
	if len(file.Webhooks) == 0 {
		return nil
	}
	var hooks []webhook.Hook
	for _, w := range file.Webhooks {
		h := webhook.Hook{Name: w.Name, URL: w.URL, Links: w.Links}
		if w.Secret != "" {
			secret, err := config.Expand(w.Secret, m.Env)
			if err != nil {
				return fmt.Errorf("webhook %s: %w", w.Name, err)
			}
			h.Secret = []byte(secret)
		}
		hooks = append(hooks, h)
	}
	e.notifiers["webhook"] = webhook.New(hooks)
	return nil
}
