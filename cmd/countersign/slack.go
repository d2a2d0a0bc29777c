package main

import "github.com/countersign/countersign/config"

// slackEffects wires Slack channel, slack.post_message and /slack/interactions.
func (m *Main) slackEffects(e *effects, file *config.File, dev bool) error {
	return nil
}
