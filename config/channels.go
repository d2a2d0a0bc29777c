package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// WebhookSpec is a webhook channel.
type WebhookSpec struct {
	Name   string `yaml:"name"`
	URL    string `yaml:"url"`
	Secret string `yaml:"secret"` // ${ENV_VAR}
	// Links puts each approver's approval link in the notification.
	Links bool `yaml:"links"`
}

var (
	// teamsChannelID is a Teams channel's conversation id: 19:…@thread.tacv2.
	teamsChannelID = regexp.MustCompile(`^19:[A-Za-z0-9._=-]+@thread\.[a-z0-9]+$`)
	teamsUserID    = regexp.MustCompile(`^(29:[A-Za-z0-9._=+/-]{1,200}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$`)
)

func checkNotify(n string, webhooks map[string]bool) error {
	ch, target, _ := strings.Cut(n, ":")
	switch ch {
	case "email", "console":
		if target != "" {
			return fmt.Errorf("notify %q: %s takes no target", n, ch)
		}
	case "slack":
		if target == "" {
			return fmt.Errorf("notify %q: use slack:#channel, slack:C0123ABC or slack:dm", n)
		}
	case "teams":
		if target != "" && !teamsChannelID.MatchString(target) {
			return fmt.Errorf("notify %q: use teams (each approver's chat) or teams:19:…@thread.tacv2 (a channel's id)", n)
		}
	case "webhook":
		if !webhooks[target] {
			return fmt.Errorf("notify %q: no webhook named %q", n, target)
		}
	default:
		return fmt.Errorf("notify %q: unknown channel (email, console, slack:…, teams, teams:…, webhook:…)", n)
	}
	return nil
}

// Channels lists the channels the routes use ("email", "slack", …).
func (f *File) Channels() []string {
	var out []string
	for _, r := range f.Routes {
		for _, n := range r.Notify {
			ch, _, _ := strings.Cut(n, ":")
			if !slices.Contains(out, ch) {
				out = append(out, ch)
			}
		}
	}
	return out
}

// validateWebhooks checks the webhook channels and returns their names.
func (f *File) validateWebhooks(bad func(string, ...any)) map[string]bool {
	webhooks := map[string]bool{}
	for i, w := range f.Webhooks {
		if !idPattern.MatchString(w.Name) {
			bad("webhooks[%d]: name %q is not a valid name", i, w.Name)
		}
		webhooks[w.Name] = true
		if !strings.HasPrefix(w.URL, "https://") && !strings.HasPrefix(w.URL, "http://") {
			bad("webhooks[%d] %s: url must be http(s)", i, w.Name)
		}
		if w.Secret != "" && !envRef.MatchString(w.Secret) {
			bad("webhooks[%d] %s: secret must be a ${ENV_VAR} reference, never a literal", i, w.Name)
		}
	}
	return webhooks
}
