package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
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

// leaseAndGet takes a lease and, when taken, reads the operation under it:
// in one step with a LeaseStore. An error with got true leaves the lease
// taken.
func (s *Service) leaseAndGet(ctx context.Context, ref Ref, name, holder string, ttl time.Duration) (got bool, left time.Duration, op *Operation, err error) {
	if ls, ok := s.store.(LeaseStore); ok {
		return ls.LeaseAndGet(ctx, ref, name, holder, ttl)
	}
	if got, left, err = s.store.Lease(ctx, ref, name, holder, ttl); err != nil || !got {
		return got, left, nil, err
	}
	op, err = s.store.Get(ctx, ref)
	return true, 0, op, err
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

// executeTimeout bounds one action's execution.
const executeTimeout = 5 * time.Minute

// execute claims an approved operation and runs it, at most once.
func (s *Service) execute(ctx context.Context, op *Operation) error {
	if !s.writes() {
		// Kill switch: keep it approved, nothing burned; look again later.
		return s.store.WakeAt(ctx, op.Ref(), "writes", s.now().Add(s.writesRetry))
	}
	action, ok := s.actions[op.Action]
	if !ok {
		return fmt.Errorf("action %s is no longer configured", op.Action)
	}
	claim := s.event(op, "executing", "system", "")
	claim.Status = StatusExecuting
	exp := s.event(op, "expired", "system", "")
	exp.Status = StatusExpired
	ct := ClaimTransition{Step: s.step(claim), Token: s.holder + "." + RandomToken(8), ExpireEvent: exp, Lease: s.execLease}
	// Only this call can recognise its own win: an unanswered claim is
	// asked again, with the same token, until the store answers.
	var won bool
	var st Status
	var asked time.Time
	if err := s.persist(ctx, "claim", op, func() (err error) {
		asked = time.Now() // the lease runs from no later than this
		won, st, err = s.store.Claim(ctx, op.Ref(), ct)
		return err
	}); err != nil {
		return err
	}
	if !won {
		if st == StatusExpired {
			s.emit(exp)
		}
		return nil
	}
	s.emit(claim)
	if s.hasCallback(op.Principal) {
		// The webhook hears "executing" while the action runs, from
		// another worker; this one is busy until the outcome.
		if err := s.store.Wake(ctx, op.Ref()); err != nil {
			s.log.Warn("waking the status webhook failed", "operation", op.Key, "err", err)
		}
	}
	xctx, receipts := s.countersign(ctx, op) // receipts exist only past the won claim
	// Every effect re-checks the claim right before it starts, and the
	// lease is renewed while the action runs (fence.go).
	fence := s.newFencer(op.Ref(), ct.Token, asked)
	xctx = WithClaimCheck(xctx, fence.check)
	stopFence := fence.keep(ctx)
	xctx, cancel := context.WithTimeout(xctx, executeTimeout)
	start := time.Now()
	result, execErr := action.Execute(xctx, op)
	elapsed := time.Since(start)
	cancel()
	stopFence()

	ft := FinishTransition{Token: ct.Token, To: StatusSucceeded, Result: result}
	done := s.event(op, "succeeded", "system", "")
	if execErr != nil {
		ft.To, done = StatusFailed, s.event(op, "failed", "system", "")
		ft.Error = toOpError(execErr)
		done.Outcome = string(ft.Error.Code)
		done.Details = map[string]any{"error": ft.Error.Message}
		if ft.Error.OutcomeUnknown != nil {
			done.Details["outcome_unknown"] = *ft.Error.OutcomeUnknown
		}
		// A result returned with the error says what was done before it
		// failed (a bulk's per-item outcomes): it is recorded with it.
	}
	done.Status = ft.To
	if done.Details == nil {
		done.Details = map[string]any{}
	}
	done.Details["duration_ms"] = elapsed.Milliseconds()
	if ft.Result != nil && !json.Valid(ft.Result) {
		ft.Result, _ = json.Marshal(string(ft.Result))
	}
	ft.Result = receipts.attach(ft.Result, done)
	ft.Step = s.step(done)
	// Should an operator have settled it meanwhile, this outcome is kept
	// beside theirs as the late outcome, with its own audit event.
	ft.Late = &LateOutcome{Status: ft.To, At: s.now().UTC(), Result: ft.Result, Error: ft.Error}
	late := s.event(op, "late_outcome", "system", "")
	// The operation's status is the operator's, which stays: known here
	// when the re-check saw it, else left out (never the stale "approved").
	late.Status = fence.settled()
	late.From = late.Status
	late.Details = map[string]any{"status": string(ft.To)}
	for k, v := range done.Details {
		late.Details[k] = v
	}
	ft.LateEvent = late
	// The effect happened (or not): this process alone knows the outcome,
	// so it keeps asking the store to record it while the store is down.
	var wasLate bool
	if err := s.persist(ctx, "record the outcome", op, func() (err error) {
		wasLate, err = s.store.Finish(ctx, op.Ref(), ft)
		return err
	}); err != nil {
		if ErrorCode(err) == CodeUnavailable {
			s.log.Error("could not record the outcome; the operation stays executing for an operator",
				"operation", op.Key, "outcome", ft.To, "err", err)
			return nil
		}
		return err
	}
	if wasLate {
		s.log.Warn("the outcome arrived after an operator settled the operation; kept as its late outcome",
			"operation", op.Key, "outcome", ft.To)
		s.emit(late)
		return nil
	}
	s.emit(done)
	return nil
}

// persistFor bounds how long persist keeps asking an unreachable store, and
// persistAfterClose how long it goes on once the service is closing.
const (
	persistFor        = 10 * time.Minute
	persistAfterClose = 10 * time.Second
)

// persist calls f until the store answers (f returns anything but
// unavailable), backing off, for at most persistFor. Used for the steps
// whose retry only this process can make: the claim it may have won, and
// the outcome of a write it made. Each call of f must carry the same
// transition id, so a retry that lands twice is recognised.
func (s *Service) persist(ctx context.Context, what string, op *Operation, f func() error) error {
	deadline := time.Now().Add(persistFor)
	var closedAt time.Time
	wait := 100 * time.Millisecond
	for i := 0; ; i++ {
		err := f()
		if err == nil || ErrorCode(err) != CodeUnavailable {
			if err == nil && i > 0 {
				s.log.Info("the store answered again", "operation", op.Key, "step", what, "attempts", i+1)
			}
			return err
		}
		if i == 0 {
			s.log.Warn("the store did not answer; asking again until it does", "operation", op.Key, "step", what, "err", err)
		}
		select {
		case <-s.closing:
			if closedAt.IsZero() {
				closedAt = time.Now()
			}
		default:
		}
		if time.Now().After(deadline) || (!closedAt.IsZero() && time.Since(closedAt) > persistAfterClose) {
			return err
		}
		sleep(ctx, wait)
		wait = min(wait*2, 5*time.Second)
	}
}

func toOpError(err error) *OpError {
	if errors.Is(err, ErrClaimLost) {
		var ee *ExecError
		if !errors.As(err, &ee) {
			err = ClaimLostExecError(err)
		}
	}
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
