package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

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
