package approval

import (
	"context"
	"slices"
	"strconv"
)

// Reminders and escalation (SPEC §10): the route's timers, scheduled when
// the operation was sent, wake the workers, which send what is due here.
// Each is recorded once by its own script, so several replicas waking at
// once send it once; both stop the moment the operation is decided (they
// only act on a pending operation, and remind only who has not decided).

// followUp sends the reminder and escalation that are due, and returns the
// operation as it stands after them.
func (s *Service) followUp(ctx context.Context, op *Operation) (*Operation, error) {
	if op.Status != StatusPending || op.SentAt == nil {
		return op, nil
	}
	now := s.now()
	moved := false
	if e := op.Route.Escalate; e != nil && op.Escalated == nil && !now.Before(op.SentAt.Add(e.After)) {
		ok, err := s.escalate(ctx, op, e)
		if err != nil {
			return op, err
		}
		moved = moved || ok
	}
	// Only the latest reminder that is due: one that was missed while no
	// worker ran is not sent late on top of it.
	n := 0
	for i, d := range op.Route.Remind {
		if !now.Before(op.SentAt.Add(d)) {
			n = i + 1
		}
	}
	if n > 0 && !slices.ContainsFunc(op.Reminded, func(r Reminder) bool { return r.N >= n }) {
		ok, err := s.remind(ctx, op, n)
		if err != nil {
			return op, err
		}
		moved = moved || ok
	}
	if !moved {
		return op, nil
	}
	return s.store.Get(ctx, op.Ref())
}

func (s *Service) escalate(ctx context.Context, op *Operation, e *Escalation) (bool, error) {
	jobs := s.planJobs(op, e.Approvers, false)
	// Where the request was posted for everyone (a Slack channel), say so
	// there too.
	for _, j := range s.planJobs(op, nil, true) {
		jobs = append(jobs, Job{ID: j.ID + "#escalated", Channel: j.Channel, Target: j.Target, Of: j.ID})
	}
	ev := s.event(op, "escalated", "system", "")
	ev.Details = map[string]any{"approvers": e.Approvers}
	ok, err := s.store.Escalate(ctx, op.Ref(), EscalateTransition{Step: s.step(ev),
		Escalated: Escalated{At: ev.Time, Approvers: e.Approvers}, Jobs: jobs})
	if ok {
		s.emit(ev)
	}
	return ok, err
}

func (s *Service) remind(ctx context.Context, op *Operation, n int) (bool, error) {
	// A reminder goes to those who were approvers when it fell due: when it
	// is sent only after an escalation that came later (both due at once,
	// on another worker), the escalated approvers, just notified, are not
	// reminded of what they have not yet seen.
	var late []string
	if e := op.Escalated; e != nil && op.SentAt != nil && op.SentAt.Add(op.Route.Remind[n-1]).Before(e.At) {
		late = e.Approvers
	}
	var waiting []string
	for _, a := range op.Approvers() {
		if !op.Decided(a) && !slices.Contains(late, a) {
			waiting = append(waiting, a)
		}
	}
	var jobs []Job
	for _, j := range s.planJobs(op, waiting, true) {
		j.Of, j.Reminder = j.ID, n
		j.ID += "#r" + strconv.Itoa(n)
		jobs = append(jobs, j)
	}
	ev := s.event(op, "reminded", "system", "")
	ev.Details = map[string]any{"reminder": n, "approvers": waiting}
	ok, err := s.store.Remind(ctx, op.Ref(), RemindTransition{Step: s.step(ev), N: n, Jobs: jobs})
	if ok {
		s.emit(ev)
	}
	return ok, err
}

// deliveryOf returns the delivery of a job, if it reached its channel.
func deliveryOf(op *Operation, job string) *Delivery {
	for i := range op.Deliveries {
		if op.Deliveries[i].Job == job {
			return &op.Deliveries[i]
		}
	}
	return nil
}
