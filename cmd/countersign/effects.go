package main

import (
	"slices"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/console"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/gateway"
	"github.com/countersign/countersign/upstream"
	"github.com/countersign/countersign/web"
)

// effects are the actions and channels built from the configuration.
type effects struct {
	actions   []approval.Action
	notifiers map[string]approval.Notifier
	devMail   web.DevMail
	// console is the console channel, which in development mode remembers
	// the links it printed for the waiting page.
	console *console.Console
	close   []func() error
	extra   []func(*approval.Service, *Main) []web.Mount
	// pool keeps the gateway's upstream MCP servers (nil: none), and gw
	// serves their tools once the service exists (gatewayFor).
	pool *upstream.Pool
	gw   *gateway.Gateway
}

func (e *effects) mounts(svc *approval.Service, m *Main) []web.Mount {
	var out []web.Mount
	for _, f := range e.extra {
		out = append(out, f(svc, m)...)
	}
	return out
}

// effects builds the actions and notifiers the configuration asks for.
func (m *Main) effects(file *config.File, dev bool) (*effects, error) {
	cons := &console.Console{W: m.Stderr, Remember: dev}
	e := &effects{console: cons, notifiers: map[string]approval.Notifier{"console": cons}}
	// One function per family of effects, each in its own file.
	for _, add := range []func(*effects, *config.File, bool) error{
		m.emailEffects, m.slackEffects, m.teamsEffects, m.httpEffects, m.webhookEffects, m.mcpEffects, m.hostToolEffects, m.gatewayEffects,
	} {
		if err := add(e, file, dev); err != nil {
			return nil, err
		}
	}
	if err := registered(e.actions); err != nil {
		return nil, err
	}
	if err := unconfiguredActions(file, func(name string) bool {
		return slices.ContainsFunc(e.actions, func(a approval.Action) bool { return a.Name() == name })
	}); err != nil {
		for _, c := range e.close {
			_ = c()
		}
		return nil, err
	}
	return e, nil
}
