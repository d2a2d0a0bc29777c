package approval

import (
	"context"
)

// Settle records the outcome of an operation left executing by a process
// that died after claiming it. countersign never retries such an
// operation on its own (at most once beats maybe twice); an operator who
// has checked the target says what happened. Returns invalid_state unless
// the operation is executing.
func (s *Service) Settle(ctx context.Context, key string, to Status, operator, note string) (*Operation, error) {
	unknown := to == OutcomeUnknown
	if to != StatusSucceeded && to != StatusFailed && !unknown {
		return nil, Errorf(CodeInvalidInput, "outcome must be succeeded, failed or unknown")
	}
	op, err := s.load(ctx, Ref{Key: key})
	if err != nil {
		return nil, err
	}
	ev := s.event(op, "reconciled", "operator:"+operator, "")
	ev.Details = map[string]any{"note": note, "outcome": string(to)}
	var opErr *OpError
	switch to {
	case StatusFailed:
		// The operator saw no effect at the target, after the executor's
		// lease passed (the store refuses this before): nothing it does
		// can start an effect any more.
		no := false
		opErr = &OpError{Code: CodeExecutionFailed, OutcomeUnknown: &no, Message: "settled as failed by an operator, who found nothing at the target: " + note,
			Details: map[string]any{"settled_by": "operator"}}
	case OutcomeUnknown:
		// Its executor may still be alive: it is fenced from now on (no
		// re-check succeeds), but a write already on the wire may land.
		to = StatusFailed
		yes := true
		opErr = &OpError{Code: CodeExecutionFailed, OutcomeUnknown: &yes, Message: "settled as outcome unknown by an operator, while its executor may still have been running: " + note,
			Details: map[string]any{"settled_by": "operator", "outcome": "unknown"}}
	}
	ev.Status = to
	before, moved, err := s.store.Settle(ctx, op.Ref(), SettleTransition{Step: s.step(ev), To: to, Error: opErr, Unknown: unknown})
	if err != nil {
		return nil, err
	}
	if !moved {
		op.Status = before
		return nil, stateError(op, "reconcile")
	}
	s.emit(ev)
	return s.store.Get(ctx, op.Ref())
}

// OutcomeUnknown is the reconcile outcome of an operator who cannot tell
// what happened, or whose executor may still be running (its lease is
// live): the operation ends failed with error.outcome_unknown true. It is
// no status of its own.
const OutcomeUnknown Status = "unknown"

// Partial reports whether op failed part-way through: a bulk operation
// whose error says some of its items were (or may have been) written
// (error.details.partial). Its written items can be undone.
func Partial(op *Operation) bool {
	if op.Status != StatusFailed || op.Error == nil {
		return false
	}
	p, _ := op.Error.Details["partial"].(bool)
	return p
}

// PrepareUndo drafts the compensating operation of a succeeded one, or of
// the written items of a bulk that failed part-way (Partial). It is
// a normal operation that needs its own approval; the two are linked
// (undoes / undone_by). Preparing it again returns the same draft while
// that one is still live.
//
// Returns not_found, invalid_state (not succeeded, or the action cannot be
// undone, e.g. email.send), stale_state (as invalid_input would, from the
// action) and the codes of Prepare.
func (s *Service) PrepareUndo(ctx context.Context, p *Principal, key string) (*Operation, bool, error) {
	op, err := s.Get(ctx, p, key)
	if err != nil {
		return nil, false, err
	}
	if op.Status != StatusSucceeded && !Partial(op) {
		return nil, false, stateError(op, "undo")
	}
	if op.UndoneBy != "" {
		prev, err := s.store.Get(ctx, Ref{Principal: op.Principal, Key: op.UndoneBy})
		if err == nil && !(prev.Status == StatusExpired || prev.Status == StatusRejected ||
			prev.Status == StatusCanceled || prev.Status == StatusFailed) {
			return prev, false, nil
		}
	}
	u, ok := optional[Undoer](s.actions[op.Action])
	if !ok {
		return nil, false, Errorf(CodeInvalidState, "%s cannot be undone", op.Action).
			WithDetails(map[string]any{"status": op.Status, "reason": "irreversible"})
	}
	action, input, err := u.UndoInput(ctx, op)
	if err != nil {
		return nil, false, err
	}
	undo, created, err := s.prepare(ctx, p, PrepareCall{Action: action, Input: input}, op.Key)
	if err != nil {
		return nil, false, err
	}
	linked, err := s.store.SetUndoneBy(ctx, op.Ref(), op.UndoneBy, undo.Key, s.now())
	if err != nil {
		return nil, false, err
	}
	if !linked {
		// A concurrent undo won; drop ours and return theirs.
		_, _ = s.Cancel(ctx, p, undo.Key)
		cur, err := s.store.Get(ctx, op.Ref())
		if err != nil {
			return nil, false, err
		}
		winner, err := s.store.Get(ctx, Ref{Principal: op.Principal, Key: cur.UndoneBy})
		return winner, false, err
	}
	return undo, created, nil
}
