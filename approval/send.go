package approval

import (
	"context"
	"strconv"
	"strings"
)

// Send moves a draft to pending_approval and queues its notifications.
// Calling it again changes nothing and returns the current operation.
// Returns writes_disabled while the kill switch is on (nothing consumed),
// invalid_state for an expired, rejected or canceled operation,
// rate_limited (requests or sends per minute) and quota_exceeded
// (max_pending).
func (s *Service) Send(ctx context.Context, p *Principal, key string) (*Operation, error) {
	op, err := s.own(ctx, p, key)
	if err != nil {
		return nil, err
	}
	switch op.Status {
	case StatusDraft:
	case StatusExpired, StatusRejected, StatusCanceled:
		return nil, stateError(op, "send")
	default:
		return op, nil
	}
	if !s.writes() {
		return nil, Errorf(CodeWritesDisabled, "writes are turned off on this service (COUNTERSIGN_WRITES=off); nothing was sent, try again later")
	}
	now := s.now().UTC()
	expires := now.Add(op.Route.ApprovalTTL)
	ev := s.event(op, "sent", "principal:"+p.ID, "")
	ev.Status = StatusPending
	ev.Details = map[string]any{"approvers": op.Route.Approvers, "required": op.Route.Required, "expires_at": expires}
	exp := s.event(op, "expired", "system", "")
	exp.Status = StatusExpired
	var timers []Timer
	for i, d := range op.Route.Remind {
		timers = append(timers, Timer{Reason: "remind:" + strconv.Itoa(i+1), At: now.Add(d)})
	}
	if e := op.Route.Escalate; e != nil {
		timers = append(timers, Timer{Reason: "escalate", At: now.Add(e.After)})
	}
	st := SendTransition{
		Step: s.step(ev), ExpiresAt: expires, Jobs: s.planJobs(op, op.Route.Approvers, true), TTL: op.Route.ApprovalTTL + s.retention,
		Quotas: p.Limits(), ExpireEvent: exp, Timers: timers,
	}
	spend, err := s.allowanceFor(ctx, p, op)
	if err != nil {
		return nil, err
	}
	if spend != nil {
		st.Spend = spend
		by := s.event(op, "approval", "allowance:"+spend.Allowance, "allowance")
		by.Status = StatusPending
		by.Details = map[string]any{"allowance": spend.Allowance, "amount": spend.Amount}
		quorum := s.event(op, "approved", "system", "")
		quorum.Status = StatusApproved
		st.AllowedEvents = []Event{by, quorum}
	}
	before, cur, err := s.store.Send(ctx, op.Ref(), st)
	if err != nil {
		return nil, err
	}
	if before == StatusDraft {
		s.emit(ev)
	}
	if cur == nil {
		cur, err = s.own(ctx, p, key)
	} else {
		cur, err = s.current(ctx, cur)
	}
	if err != nil {
		return nil, err
	}
	if before == StatusDraft && cur.Allowance != "" {
		for _, e := range st.AllowedEvents {
			s.emit(e)
		}
	}
	if before != StatusDraft && cur.Status.Terminal() && cur.Status != StatusSucceeded && cur.Status != StatusFailed {
		return nil, stateError(cur, "send")
	}
	return cur, nil
}

func stateError(op *Operation, verb string) error {
	return Errorf(CodeInvalidState, "cannot %s operation %s: it is %s", verb, op.Key, op.Status).
		WithDetails(map[string]any{"status": op.Status})
}

// planJobs expands the route's notify list into one job per message:
// one per approver for personal channels, and with shared, one per shared
// target (a Slack channel).
func (s *Service) planJobs(op *Operation, approvers []string, shared bool) []Job {
	var jobs []Job
	for _, spec := range op.Route.Notify {
		channel, target, _ := strings.Cut(spec, ":")
		pa, _ := optional[PerApprover](s.notifiers[channel])
		switch {
		case channel == "slack" && target != "dm",
			channel == "teams" && target != "", // a Teams channel; "teams" alone is each approver's chat
			channel == "webhook" && (pa == nil || !pa.PerApprover(target)):
			if shared {
				jobs = append(jobs, Job{ID: spec, Channel: channel, Target: target})
			}
		default:
			for _, a := range approvers {
				ap := s.policy.Approver(a)
				if ap == nil || (channel == "email" && ap.Email == "") || (channel == "slack" && ap.SlackUserID == "") ||
					(channel == "teams" && ap.TeamsUserID == "") {
					continue
				}
				jobs = append(jobs, Job{ID: spec + ":" + a, Channel: channel, Target: target, Approver: a,
					Link: channel == "email" || channel == "console" || channel == "webhook"})
			}
		}
	}
	return jobs
}

// Cancel ends a draft or pending operation of p, or of anyone when p is nil
// (an operator). Canceling a canceled operation returns it unchanged.
// Returns invalid_state otherwise.
func (s *Service) Cancel(ctx context.Context, p *Principal, key string) (*Operation, error) {
	actor := "operator"
	if p != nil {
		actor = "principal:" + p.ID
	}
	return s.cancel(ctx, p, key, actor)
}

// cancel is Cancel recorded in the audit as done by actor.
func (s *Service) cancel(ctx context.Context, p *Principal, key, actor string) (*Operation, error) {
	var op *Operation
	var err error
	if p != nil {
		if err := s.store.Rate(ctx, p.ID, p.Limits().RequestsPerMinute); err != nil {
			return nil, err
		}
		op, err = s.own(ctx, p, key)
	} else {
		op, err = s.load(ctx, Ref{Key: key})
	}
	if err != nil {
		return nil, err
	}
	ev := s.event(op, "canceled", actor, "")
	ev.Status = StatusCanceled
	before, moved, err := s.store.Cancel(ctx, op.Ref(), s.step(ev))
	if err != nil {
		return nil, err
	}
	if !moved && before != StatusCanceled {
		op.Status = before
		return nil, stateError(op, "cancel")
	}
	if moved {
		s.emit(ev)
		if before == StatusDraft && s.hasCallback(op.Principal) {
			// A draft's end wakes no worker by itself; the webhook hears it.
			if err := s.store.Wake(ctx, op.Ref()); err != nil {
				s.log.Warn("waking the status webhook failed", "operation", op.Key, "err", err)
			}
		}
	}
	return s.store.Get(ctx, op.Ref())
}
