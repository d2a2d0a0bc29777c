package main

import (
	"fmt"

	"github.com/countersign/countersign/channel/callback"
	"github.com/countersign/countersign/config"
)

// callbacks builds the principals' status webhooks (callback_url), their
// secrets resolved from the environment; nil when no principal has one.
func (m *Main) callbacks(file *config.File) (*callback.Sender, error) {
	var hooks []callback.Hook
	for _, p := range file.Principals {
		if p.CallbackURL == "" {
			continue
		}
		secret, err := config.Expand(p.CallbackSecret, m.Env)
		if err != nil {
			return nil, fmt.Errorf("principal %s: callback_secret: %w", p.ID, err)
		}
		if len(secret) < 16 {
			return nil, fmt.Errorf("principal %s: callback_secret must be at least 16 characters", p.ID)
		}
		hooks = append(hooks, callback.Hook{Principal: p.ID, URL: p.CallbackURL, Secret: []byte(secret)})
	}
	if len(hooks) == 0 {
		return nil, nil
	}
	return callback.New(hooks), nil
}
