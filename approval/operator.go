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
	op, err := s.load(ctx, key)
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
	_, moved, err := s.store.Move(ctx, key, MoveTransition{
		From: []Status{StatusExecuting}, To: to, Now: s.now(), Error: opErr, Event: ev, TTL: s.retention,
	})
	if err != nil {
		return nil, err
	}
	if !moved {
		cur, _ := s.store.Get(ctx, key)
		if cur == nil {
			cur = op
		}
		return nil, stateError(cur, "reconcile")
	}
	s.emit(ev)
	s.wake(ctx, key)
	return s.store.Get(ctx, key)
}

// PrepareUndo drafts the compensating operation of a succeeded one. It is
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
	if op.Status != StatusSucceeded {
		return nil, false, stateError(op, "undo")
	}
	if op.UndoneBy != "" {
		prev, err := s.store.Get(ctx, op.UndoneBy)
		if err == nil && !(prev.Status == StatusExpired || prev.Status == StatusRejected ||
			prev.Status == StatusCanceled || prev.Status == StatusFailed) {
			return prev, false, nil
		}
	}
	u, ok := s.actions[op.Action].(Undoer)
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
	linked, err := s.store.SetUndoneBy(ctx, op.Key, op.UndoneBy, undo.Key)
	if err != nil {
		return nil, false, err
	}
	if !linked {
		// A concurrent undo won; drop ours and return theirs.
		_, _ = s.Cancel(ctx, p, undo.Key)
		cur, err := s.store.Get(ctx, op.Key)
		if err != nil {
			return nil, false, err
		}
		winner, err := s.store.Get(ctx, cur.UndoneBy)
		return winner, false, err
	}
	return undo, created, nil
}
