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
	if to != StatusSucceeded && to != StatusFailed {
		return nil, Errorf(CodeInvalidInput, "outcome must be succeeded or failed")
	}
	op, err := s.load(ctx, Ref{Key: key})
	if err != nil {
		return nil, err
	}
	ev := s.event(op, "reconciled", "operator:"+operator, "")
	ev.Status = to
	ev.Details = map[string]any{"note": note}
	var opErr *OpError
	if to == StatusFailed {
		opErr = &OpError{Code: CodeExecutionFailed, Message: "settled as failed by an operator: " + note}
	}
	before, moved, err := s.store.Settle(ctx, op.Ref(), SettleTransition{Step: s.step(ev), To: to, Error: opErr})
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
