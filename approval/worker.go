package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Workers take woken operations off the queue and bring them forward:
// deliver notifications, execute approved operations, expire them, and
// keep editable messages in sync. Reconcile is idempotent and safe to run
// concurrently on any number of replicas: deliveries are leased and
// recorded once, and execution starts only through the atomic claim.

// RunWorkers runs n workers until ctx ends.
func (s *Service) RunWorkers(ctx context.Context, q Queue, name string, n int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.work(ctx, q, fmt.Sprintf("%s-%d", name, i))
		}()
	}
	wg.Wait()
}

func (s *Service) work(ctx context.Context, q Queue, consumer string) {
	for ctx.Err() == nil {
		t, err := q.Next(ctx, consumer)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("queue read failed", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		if t.Operation == "" {
			continue
		}
		// Finish the task even if shutdown begins mid-way: an execution
		// cut short would be recorded as failed when it may have worked.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		err = s.Reconcile(rctx, t.Operation)
		cancel()
		if err != nil {
			// Leave the task unacknowledged: another worker claims it after
			// its idle time, and the scheduled retry wakes it too.
			s.log.Warn("reconcile failed", "operation", t.Operation, "err", err)
			if s.store.WakeAt(context.WithoutCancel(ctx), t.Operation, "retry", s.now().Add(5*time.Second)) != nil {
				// The store itself is failing: keep knocking from here, so
				// the operation moves on as soon as it is back.
				go s.rewake(ctx, t.Operation)
			}
			continue
		}
		if err := q.Done(context.WithoutCancel(ctx), t); err != nil {
			s.log.Warn("queue ack failed", "err", err)
		}
	}
}

// rewake retries, while the store is unreachable (for about five
// minutes), to release the given leases and wake the operation.
func (s *Service) rewake(ctx context.Context, key string, leases ...string) {
	for i := range 40 {
		sleep(ctx, min(time.Second<<min(i, 3), 8*time.Second))
		if ctx.Err() != nil {
			return
		}
		for len(leases) > 0 && s.store.Unlease(ctx, key, leases[0]) == nil {
			leases = leases[1:]
		}
		if len(leases) == 0 && s.store.Wake(ctx, key) == nil {
			return
		}
	}
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
func (s *Service) Reconcile(ctx context.Context, key string) error {
	op, err := s.load(ctx, key)
	if ErrorCode(err) == CodeNotFound {
		return nil // gone after retention
	}
	if err != nil {
		return err
	}
	switch op.Status {
	case StatusPending:
		if err := s.deliver(ctx, op); err != nil {
			return err
		}
		// Read again: a decision may have landed while a message was on its
		// way, and that message must then be brought up to date.
		if op, err = s.store.Get(ctx, key); err != nil {
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
		if err != nil {
			return err
		}
		if op, err = s.store.Get(ctx, key); err != nil {
			return err
		}
	}
	return s.sync(ctx, op)
}

// deliver sends every job not yet delivered. Each job is independent and
// runs on its own: one channel failing or hanging never delays another.
func (s *Service) deliver(ctx context.Context, op *Operation) error {
	msg := BuildMessage(op, s.policy, s.now())
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
			if err := s.deliverOne(ctx, op, job, n, msg); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // the first store error, if any
}

// deliverOne delivers one job under its lease. Notifier failures are
// retried later with backoff; only store failures are returned.
func (s *Service) deliverOne(ctx context.Context, op *Operation, job Job, n Notifier, msg Message) error {
	lease := "job:" + job.ID
	got, left, err := s.store.Lease(ctx, op.Key, lease, time.Minute)
	if err != nil {
		return err
	}
	if !got {
		// Another worker delivers it, or it is backing off. Look again when
		// the lease runs out: the wake-up for its retry may have come a
		// little early (the store's clock is not ours) and been spent here.
		return s.store.WakeAt(ctx, op.Key, "job:"+job.ID, s.now().Add(left+100*time.Millisecond))
	}
	// op may be stale: another worker may have delivered this job and
	// released its lease since op was read. Look again under the lease.
	if cur, err := s.store.Get(ctx, op.Key); err != nil || cur.Status != StatusPending || delivered(cur, job.ID) {
		_ = s.store.Unlease(ctx, op.Key, lease)
		return err
	}
	if err := s.deliverJob(ctx, op, job, n, msg); err != nil {
		if ErrorCode(err) == CodeUnavailable {
			// Our store failed, not the channel: free the lease and wake the
			// operation again as soon as the store is back.
			go s.rewake(ctx, op.Key, lease)
			return nil
		}
		attempt := s.bumpAttempt(op.Key, job.ID)
		wait := backoff(attempt)
		var ra *RetryAfterError
		if errors.As(err, &ra) && ra.After > wait {
			wait = ra.After
		}
		// Hold the lease for the backoff so no replica retries sooner.
		_ = s.store.HoldLease(ctx, op.Key, lease, wait)
		ev := s.event(op, "notify_failed", "system", job.Channel)
		ev.Details = map[string]any{"job": job.ID, "attempt": attempt, "retry_in_seconds": int(wait.Seconds()), "error": SafeError(err)}
		s.emit(ev)
		s.log.Warn("notification failed; will retry", "operation", op.Key, "job", job.ID, "attempt", attempt, "retry_in", wait, "err", SafeError(err))
		return s.store.WakeAt(ctx, op.Key, "job:"+job.ID, s.now().Add(wait))
	}
	_ = s.store.Unlease(ctx, op.Key, lease)
	s.attempts.Delete(op.Key + "|" + job.ID)
	return nil
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

func (s *Service) deliverJob(ctx context.Context, op *Operation, job Job, n Notifier, msg Message) error {
	notice := Notice{Job: job, Message: msg}
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
		ok, err := s.store.AddCapability(ctx, op.Key, claims.NonceHash(),
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
	if _, err := s.store.RecordDelivery(ctx, op.Key, Delivery{Job: job.ID, Channel: job.Channel, To: to, At: s.now().UTC(), Handle: handle}, ev); err != nil {
		return err
	}
	s.emit(ev)
	return nil
}

// bumpAttempt counts failed deliveries of a job in this process, for
// backoff. (Another replica starts its own count: the lease held for the
// backoff is what spaces retries out across replicas.)
func (s *Service) bumpAttempt(key, job string) int {
	v, _ := s.attempts.LoadOrStore(key+"|"+job, new(atomic.Int32))
	return int(v.(*atomic.Int32).Add(1))
}

// backoff is 2^attempt seconds, at most five minutes.
func backoff(attempt int) time.Duration {
	d := time.Second << min(attempt, 9)
	return min(d, 5*time.Minute)
}

// SafeError turns an error into text fit for logs and the audit: the
// message of coded errors, a generic text otherwise. Notifier and action
// errors are written to be safe; capabilities are never put in errors.
func SafeError(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	var ee *ExecError
	if errors.As(err, &ee) {
		return ee.Message
	}
	s := err.Error()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// execute claims an approved operation and runs it, at most once.
func (s *Service) execute(ctx context.Context, op *Operation) error {
	if !s.writes() {
		// Kill switch: keep it approved, nothing burned; look again later.
		return s.store.WakeAt(ctx, op.Key, "writes", s.now().Add(s.writesRetry))
	}
	action, ok := s.actions[op.Action]
	if !ok {
		return fmt.Errorf("action %s is no longer configured", op.Action)
	}
	claim := s.event(op, "executing", "system", "")
	claim.Status = StatusExecuting
	exp := s.event(op, "expired", "system", "")
	exp.Status = StatusExpired
	_, won, err := s.store.Move(ctx, op.Key, MoveTransition{
		From: []Status{StatusApproved}, To: StatusExecuting, Now: s.now(), Unexpired: true,
		ExpireEvent: exp, Event: claim, TTL: s.retention,
	})
	if err != nil || !won {
		return err
	}
	s.emit(claim)
	start := time.Now()
	result, execErr := action.Execute(ctx, op)
	elapsed := time.Since(start)

	to, done := StatusSucceeded, s.event(op, "succeeded", "system", "")
	var opErr *OpError
	if execErr != nil {
		to, done = StatusFailed, s.event(op, "failed", "system", "")
		opErr = toOpError(execErr)
		done.Outcome = string(opErr.Code)
		done.Details = map[string]any{"error": opErr.Message}
		if opErr.OutcomeUnknown != nil {
			done.Details["outcome_unknown"] = *opErr.OutcomeUnknown
		}
		result = nil
	}
	done.Status = to
	if done.Details == nil {
		done.Details = map[string]any{}
	}
	done.Details["duration_ms"] = elapsed.Milliseconds()
	if result != nil && !json.Valid(result) {
		result, _ = json.Marshal(string(result))
	}
	// The effect happened (or not); recording it must not be lost to a
	// passing store failure, so retry a few times before giving up. If
	// it is never recorded the operation stays executing for an operator.
	var lastErr error
	for i := range 5 {
		if _, _, lastErr = s.store.Move(ctx, op.Key, MoveTransition{
			From: []Status{StatusExecuting}, To: to, Now: s.now(), Result: result, Error: opErr, Event: done, TTL: s.retention,
		}); lastErr == nil {
			s.emit(done)
			return nil
		}
		sleep(ctx, time.Duration(i+1)*200*time.Millisecond)
	}
	s.log.Error("could not record the outcome; the operation stays executing for an operator",
		"operation", op.Key, "outcome", to, "err", lastErr)
	return nil
}

func toOpError(err error) *OpError {
	var ee *ExecError
	if errors.As(err, &ee) {
		e := &OpError{Code: ee.Code, Message: ee.Message, Details: ee.Details}
		if ee.Code == CodeExecutionFailed {
			u := ee.OutcomeUnknown
			e.OutcomeUnknown = &u
		}
		return e
	}
	// An error the action did not classify: we cannot say nothing happened.
	u := true
	return &OpError{Code: CodeExecutionFailed, Message: "execution failed: " + SafeError(err), OutcomeUnknown: &u}
}

// sync edits every delivered message that can be edited (Slack) to show
// where the operation stands now.
func (s *Service) sync(ctx context.Context, op *Operation) error {
	if op.Status == StatusDraft {
		return nil
	}
	mark := string(op.Status) + "/" + strconv.Itoa(len(op.Approvals))
	var msg *Message
	for _, d := range op.Deliveries {
		u, ok := s.notifiers[d.Channel].(Updater)
		if !ok || d.Handle == nil {
			continue
		}
		if op.Status == StatusPending && len(op.Approvals) == 0 {
			continue // the message as posted is current
		}
		fresh, err := s.store.MarkSynced(ctx, op.Key, d.Job, Status(mark))
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
			_, _ = s.store.MarkSynced(ctx, op.Key, d.Job, "")
			wait := 5 * time.Second
			var ra *RetryAfterError
			if errors.As(err, &ra) && ra.After > wait {
				wait = ra.After
			}
			s.log.Warn("message update failed; will retry", "operation", op.Key, "job", d.Job, "err", SafeError(err))
			if err := s.store.WakeAt(ctx, op.Key, "sync", s.now().Add(wait)); err != nil {
				return err
			}
		}
	}
	return nil
}

// RunTimers turns due wake-ups (retries, window ends, guards) into queue
// tasks until ctx ends. Every replica may run it: firing is atomic.
func (s *Service) RunTimers(ctx context.Context, q Queue, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := q.FireDue(ctx, s.now()); err != nil && ctx.Err() == nil {
			s.log.Warn("firing timers failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
