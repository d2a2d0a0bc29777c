package approval

import (
	"context"
	"time"
)

// Workers take woken operations off the queue and bring them forward:
// deliver notifications, execute approved operations, and keep editable
// messages in sync. Reconcile is idempotent and safe to run concurrently on
// any number of replicas: deliveries are leased and recorded once, and
// execution starts only through the atomic claim.

// jobLease is how long a notification job is leased to one worker; the
// worker renews it while it delivers, so a replica that dies mid-delivery
// holds the job up for at most this long.
const jobLease = 8 * time.Second

// RunWorkers runs n workers until ctx ends, then waits for the tasks in
// progress.
func (s *Service) RunWorkers(ctx context.Context, q Queue, name string, n int) {
	q.Consume(ctx, name, n, s.handle)
}

// handle brings one woken operation forward. A store failure leaves the
// task to be retried; any other failure is logged and not retried (a
// corrupt operation would fail forever).
func (s *Service) handle(ctx context.Context, t Task) error {
	if t.Ref.Key == "" {
		return nil
	}
	// Finish the task even if shutdown begins mid-way: an execution cut
	// short would be recorded as failed when it may have worked.
	err := s.reconcile(context.WithoutCancel(ctx), t.Ref, true)
	switch {
	case err == nil:
		return nil
	case ErrorCode(err) == CodeUnavailable:
		s.log.Warn("reconcile failed; it will be retried", "operation", t.Ref.Key, "err", err)
		return err
	}
	s.log.Error("reconcile failed; not retried", "operation", t.Ref.Key, "err", err)
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Reconcile brings one operation forward as far as it can go now.
func (s *Service) Reconcile(ctx context.Context, ref Ref) error {
	return s.reconcile(ctx, ref, false)
}

// reconcile is Reconcile; queued is true for a worker's task. Then what
// the execution's outcome still asks for (the messages showing it, the
// status webhook) is left to the task the outcome queued: the script that
// records it wakes the workers in the same step, so nothing is lost, and
// the operation is not read and its messages marked twice.
func (s *Service) reconcile(ctx context.Context, ref Ref, queued bool) error {
	op, err := s.load(ctx, ref)
	if ErrorCode(err) == CodeNotFound {
		return nil // gone after retention
	}
	if err != nil {
		return err
	}
	switch op.Status {
	case StatusPending:
		if op, err = s.followUp(ctx, op); err != nil {
			return err
		}
		after, err := s.deliver(ctx, op)
		if err != nil {
			return err
		}
		// Read again: a decision may have landed while a message was on its
		// way, and that message must then be brought up to date. The store's
		// answer to the last delivery recorded here is such a read: a
		// decision after it queued a task of its own, which finds every
		// delivery recorded.
		if after != nil {
			op = after
		} else if op, err = s.store.Get(ctx, op.Ref()); err != nil {
			return err
		}
	case StatusApproved:
		// Show "approved" on editable messages (buttons gone) while it
		// runs, then the outcome: the final sync waits for the first.
		shown := make(chan struct{})
		go func() {
			defer close(shown)
			if err := s.sync(ctx, op); err != nil {
				s.log.Warn("message update failed", "operation", op.Key, "err", err)
			}
		}()
		err := s.execute(ctx, op)
		<-shown
		if err != nil || queued {
			return err
		}
		if op, err = s.store.Get(ctx, op.Ref()); err != nil {
			return err
		}
	}
	if err := s.sync(ctx, op); err != nil {
		return err
	}
	return s.callback(ctx, op)
}

// RunTimers turns due wake-ups (retries) into queue tasks, and ends the
// operations whose window passed, until ctx ends. Every replica may run
// it: firing and expiring are atomic.
func (s *Service) RunTimers(ctx context.Context, q Queue, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	sweepEvery := max(every, time.Second)
	var lastSweep time.Time
	for {
		if _, err := q.FireDue(ctx, s.now()); err != nil && ctx.Err() == nil {
			s.log.Warn("firing timers failed", "err", err)
		}
		if time.Since(lastSweep) >= sweepEvery {
			lastSweep = time.Now()
			s.sweep(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep ends every operation whose window has passed.
func (s *Service) sweep(ctx context.Context) {
	evs, err := s.store.SweepExpired(ctx, s.now(), SweepTransition{Retention: s.retention, DraftRetention: s.draftRetention,
		Event: Event{Event: "expired", Actor: "system", Status: StatusExpired}})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("expiring operations failed", "err", err)
	}
	for _, ev := range evs {
		s.emit(ev)
		if ev.From == StatusDraft && ev.Principal != "" && s.hasCallback(ev.Principal) {
			// A draft's expiry wakes no worker by itself; the webhook hears it.
			if err := s.store.Wake(ctx, Ref{Principal: ev.Principal, Key: ev.Operation}); err != nil {
				s.log.Warn("waking the status webhook failed", "operation", ev.Operation, "err", err)
			}
		}
	}
}
