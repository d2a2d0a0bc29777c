package approval

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// deliver sends every job not yet delivered. Each job is independent and
// runs on its own: one channel failing or hanging never delays another.
// It returns the newest operation the store answered a recorded delivery
// with, nil when none.
func (s *Service) deliver(ctx context.Context, op *Operation) (*Operation, error) {
	msg := BuildMessage(op, s.policy, s.now())
	var after newest
	var wg sync.WaitGroup
	errs := make(chan error, len(op.Jobs))
	sem := make(chan struct{}, 8)
	for _, job := range op.Jobs {
		if delivered(op, job.ID) {
			continue
		}
		n, ok := s.notifiers[job.Channel]
		if !ok {
			s.log.Error("no notifier for channel; job skipped", "operation", op.Key, "channel", job.Channel)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := s.deliverOne(ctx, op, job, n, msg, &after); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err // the first store error
	}
	return after.op, nil
}

// newest keeps the newest of the operations concurrent deliveries were
// answered with.
type newest struct {
	mu sync.Mutex
	op *Operation
}

func (n *newest) offer(op *Operation) {
	if op == nil {
		return
	}
	n.mu.Lock()
	if n.op == nil || op.Version > n.op.Version {
		n.op = op
	}
	n.mu.Unlock()
}

// deliverOne delivers one job under its lease. Notifier failures are
// retried later with backoff; only store failures are returned.
func (s *Service) deliverOne(ctx context.Context, op *Operation, job Job, n Notifier, msg Message, after *newest) error {
	lease := "job:" + job.ID
	holder := s.holder + "." + RandomToken(5) // this delivery, not just this process
	// op may be stale: another worker may have delivered this job and
	// released its lease since op was read. Look again under the lease.
	got, left, cur, err := s.leaseAndGet(ctx, op.Ref(), lease, holder, jobLease)
	if err != nil && !got {
		return err
	}
	if !got {
		// Another worker delivers it, or it is backing off. Look again when
		// the lease runs out: the wake-up for its retry may have come a
		// little early (the store's clock is not ours) and been spent here.
		return s.store.WakeAt(ctx, op.Ref(), lease, s.now().Add(left+100*time.Millisecond))
	}
	if err != nil || cur.Status != StatusPending || delivered(cur, job.ID) {
		_ = s.store.Unlease(ctx, op.Ref(), lease, holder)
		return err
	}
	stop := s.keepLease(ctx, op.Ref(), lease, holder)
	err = s.deliverJob(ctx, op, job, n, msg, after)
	stop()
	if err != nil {
		if ErrorCode(err) == CodeUnavailable {
			// Our store failed, not the channel: the task is retried, and
			// the lease runs out on its own meanwhile.
			return err
		}
		var least time.Duration
		var ra *RetryAfterError
		if errors.As(err, &ra) {
			least = ra.After
		}
		ev := s.event(op, "notify_failed", "system", job.Channel)
		ev.Details = map[string]any{"job": job.ID, "error": SafeError(err)}
		attempt, wait, ferr := s.store.FailDelivery(ctx, op.Ref(), job.ID, least, ev)
		if ferr != nil {
			return ferr
		}
		if attempt == 0 {
			// Another worker delivered the job while this one was paused
			// past its lease: its late failure is no failure of the job.
			s.log.Info("a late notification attempt failed after another worker delivered the job; nothing recorded",
				"operation", op.Key, "job", job.ID, "err", SafeError(err))
			return nil
		}
		if attempt <= 3 || attempt%10 == 0 { // what the store audited
			ev.Details["attempt"], ev.Details["retry_in_seconds"] = attempt, int(wait.Seconds())
			s.emit(ev)
		}
		s.log.Warn("notification failed; will retry", "operation", op.Key, "job", job.ID, "attempt", attempt,
			"retry_in", wait, "err", SafeError(err))
		return nil
	}
	_ = s.store.Unlease(ctx, op.Ref(), lease, holder)
	return nil
}

// leaseAndGet takes a lease and, when taken, reads the operation under it,
// in one step. An error with got true leaves the lease taken.
func (s *Service) leaseAndGet(ctx context.Context, ref Ref, name, holder string, ttl time.Duration) (got bool, left time.Duration, op *Operation, err error) {
	return s.store.LeaseAndGet(ctx, ref, name, holder, ttl)
}

// keepLease renews a lease while its holder works; stop ends the renewal
// and waits for it.
func (s *Service) keepLease(ctx context.Context, ref Ref, name, holder string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(jobLease / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if _, err := s.store.RenewLease(ctx, ref, name, holder, jobLease); err != nil {
					s.log.Warn("renewing a job lease failed", "operation", ref.Key, "lease", name, "err", err)
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// delivered reports whether op records a delivery of job.
func delivered(op *Operation, job string) bool {
	for _, d := range op.Deliveries {
		if d.Job == job {
			return true
		}
	}
	return false
}

func (s *Service) deliverJob(ctx context.Context, op *Operation, job Job, n Notifier, msg Message, after *newest) error {
	notice := Notice{Job: job, Message: msg}
	if job.Of != "" {
		notice.FollowUp = &FollowUp{Reminder: job.Reminder, Original: deliveryOf(op, job.Of)}
	}
	to := job.Target
	if job.Approver != "" {
		notice.Approver = s.policy.Approver(job.Approver)
		if notice.Approver == nil {
			return fmt.Errorf("approver %s is no longer configured", job.Approver)
		}
		to = job.Approver
	}
	if job.Link {
		claims := NewLinkClaims(op.Key, job.Approver, job.Channel, op.ExpiresAt)
		ok, err := s.store.AddCapability(ctx, op.Ref(), claims.NonceHash(),
			Capability{Approver: job.Approver, Channel: job.Channel, Expires: claims.Expires}, s.now())
		if err != nil {
			return err
		}
		if !ok {
			return nil // no longer pending: nothing to ask
		}
		notice.Link = s.publicURL + "/a/" + s.links.Sign(claims, op.PayloadHash)
	}
	handle, err := n.Notify(ctx, notice)
	if err != nil {
		return err
	}
	ev := s.event(op, "notified", "system", job.Channel)
	ev.Details = map[string]any{"job": job.ID, "to": to}
	recorded, cur, err := s.store.RecordDelivery(ctx, op.Ref(), Delivery{Job: job.ID, Channel: job.Channel, To: to, At: s.now().UTC(), Handle: handle}, ev)
	if err != nil {
		return err
	}
	if !recorded {
		// Another worker delivered the job while this one was paused past
		// its lease: this message is a second copy; the first delivery
		// stays the recorded one.
		s.log.Info("a notification was delivered again after another worker had delivered it", "operation", op.Key, "job", job.ID)
	}
	after.offer(cur)
	s.emit(ev)
	return nil
}

// sync edits every delivered message that can be edited (Slack) to show
// where the operation stands now.
func (s *Service) sync(ctx context.Context, op *Operation) error {
	if op.Status == StatusDraft {
		return nil
	}
	// Approved and executing look alike in a message (decided, buttons
	// gone): one update covers both, whichever a worker sees first.
	st := op.Status
	if st == StatusExecuting {
		st = StatusApproved
	}
	// The version orders the marks: a worker holding an older read of the
	// operation never brings a message back to an older state.
	mark := strconv.FormatInt(op.Version, 10) + "|" + string(st) + "/" + strconv.Itoa(len(op.Approvals)) + "/" + strconv.Itoa(len(op.Reminded))
	if op.Escalated != nil {
		mark += "/e"
	}
	if op.RevokedAt != nil {
		mark += "/r"
	}
	var msg *Message
	for _, d := range op.Deliveries {
		u, ok := optional[Updater](s.notifiers[d.Channel])
		if !ok || d.Handle == nil {
			continue
		}
		if op.Status == StatusPending && len(op.Approvals) == 0 && len(op.Reminded) == 0 && op.Escalated == nil {
			continue // the message as posted is current
		}
		fresh, err := s.store.MarkSynced(ctx, op.Ref(), d.Job, mark)
		if err != nil {
			return err
		}
		if !fresh {
			continue
		}
		if msg == nil {
			m := BuildMessage(op, s.policy, s.now())
			msg = &m
		}
		if err := u.Update(ctx, d, *msg); err != nil {
			// Forget the mark so the retry updates again.
			_, _ = s.store.MarkSynced(ctx, op.Ref(), d.Job, "")
			wait := 5 * time.Second
			var ra *RetryAfterError
			if errors.As(err, &ra) && ra.After > wait {
				wait = ra.After
			}
			s.log.Warn("message update failed; will retry", "operation", op.Key, "job", d.Job, "err", SafeError(err))
			if err := s.store.WakeAt(ctx, op.Ref(), "sync", s.now().Add(wait)); err != nil {
				return err
			}
		}
	}
	return nil
}
