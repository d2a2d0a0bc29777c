package approval

import "context"

// EventPassed is the audit event of a gateway call that ran at once
// (SPEC §12): a tool the policy lets pass, which makes no operation.
const EventPassed = "passed"

// Passed records a call of an upstream's pass tool: one audit event of the
// principal (details: upstream, tool, arguments_sha256, bytes,
// duration_ms, outcome), in the chain of its shard.
func (s *Service) Passed(ctx context.Context, p *Principal, outcome string, details map[string]any) error {
	ev := Event{Time: s.now().UTC(), Event: EventPassed, Actor: "principal:" + p.ID, Channel: "gateway",
		Outcome: outcome, Details: details, Principal: p.ID}
	if err := s.store.NoteFree(ctx, p.ID, ev); err != nil {
		return err
	}
	s.emit(ev)
	return nil
}

// PassRate counts one pass call of p to an upstream against that
// upstream's pass_rate. Returns rate_limited.
func (s *Service) PassRate(ctx context.Context, p *Principal, upstream string, perMinute int) error {
	return s.store.Rate(ctx, "gateway:"+upstream+":"+p.ID, perMinute)
}
