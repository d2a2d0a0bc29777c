package approval

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// matches reports whether op falls within the allowance's envelope, and the
// amount it takes of the sum budget.
func (a *Allowance) matches(op *Operation, now time.Time) (float64, bool) {
	in := a.Input
	if a.Revoked || !now.Before(a.Until) || op.Action != in.Action || op.Principal != a.Principal {
		return 0, false
	}
	for attr, b := range in.Match {
		v, ok := op.Attrs[attr]
		if !ok || !b.holds(v, listAttrs[attr]) {
			return 0, false // an attribute it cannot check never matches
		}
	}
	amount := 0.0
	if s := in.Budget.Sum; s != nil {
		v, ok := op.Attrs[SumAttr(s.Attr)] // a bulk's total over its writes
		if !ok {
			v = op.Attrs[s.Attr]
		}
		n, err := strconv.ParseFloat(v, 64)
		if !jsonNumber.MatchString(v) || err != nil || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return 0, false
		}
		if a.SumLeft != nil && n > *a.SumLeft {
			return 0, false
		}
		amount = n
	}
	if a.CountLeft != nil && *a.CountLeft < 1 {
		return 0, false
	}
	return amount, true
}

func (b Limit) holds(v string, list bool) bool {
	if len(b.In) > 0 {
		if v == "" {
			return false
		}
		elems := []string{v}
		if list {
			elems = strings.Split(v, ",")
		}
		for _, e := range elems {
			if !slices.Contains(b.In, e) {
				return false
			}
		}
	}
	if b.Min != nil || b.Max != nil {
		n, err := strconv.ParseFloat(v, 64)
		if !jsonNumber.MatchString(v) || err != nil || math.IsNaN(n) || (b.Min != nil && n < *b.Min) || (b.Max != nil && n > *b.Max) {
			return false
		}
	}
	return true
}

// allowanceFor finds an active allowance of p that may approve op at
// send, and what it would take from it. Allowances never approve an
// irreversible action unless its route says allowances: allow.
func (s *Service) allowanceFor(ctx context.Context, p *Principal, op *Operation) (*Spend, error) {
	if op.Action == GrantAction || op.Undoes != "" {
		return nil, nil
	}
	if slices.Contains(op.Preview.Warnings, "irreversible") && !op.Route.Allowances {
		return nil, nil
	}
	list, err := s.store.Allowances(ctx, p.ID)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	now := s.now()
	for _, a := range list {
		if amount, ok := a.matches(op, now); ok {
			return &Spend{Allowance: a.ID, Amount: amount}, nil
		}
	}
	return nil, nil
}

// RequestAllowance prepares an allowance and sends it to its approvers in
// one call (request_allowance, POST /v1/allowances). Returns the codes of
// Prepare and Send.
func (s *Service) RequestAllowance(ctx context.Context, p *Principal, input json.RawMessage, idem string) (*Operation, bool, error) {
	op, created, err := s.Prepare(ctx, p, PrepareCall{Action: GrantAction, Input: input, IdempotencyKey: idem})
	if err != nil {
		return nil, false, err
	}
	if op.Status != StatusDraft {
		return op, created, nil
	}
	sent, err := s.Send(ctx, p, op.Key)
	return sent, created, err
}

// RevokeAllowance ends an allowance at once: it approves nothing more.
// actor is "operator:<id>" or "approver:<id>" (an approver of its route).
// Returns not_found and invalid_state (not an active allowance, or
// revoked already).
func (s *Service) RevokeAllowance(ctx context.Context, id, actor string) (*Operation, error) {
	op, err := s.load(ctx, Ref{Key: id})
	if err != nil {
		return nil, err
	}
	if op.Action != GrantAction || op.Status != StatusSucceeded {
		return nil, Errorf(CodeInvalidState, "%s is not an active allowance", id).WithDetails(map[string]any{"status": op.Status})
	}
	if op.RevokedAt != nil {
		return nil, Errorf(CodeInvalidState, "%s was revoked already", id).WithDetails(map[string]any{"status": op.Status, "revoked_at": *op.RevokedAt})
	}
	ev := s.event(op, "revoked", actor, "")
	ev.Status = op.Status
	done, err := s.store.RevokeAllowance(ctx, op.Ref(), s.step(ev))
	if err != nil {
		return nil, err
	}
	if !done { // someone else revoked it in between
		return nil, Errorf(CodeInvalidState, "%s was revoked already", id).WithDetails(map[string]any{"status": op.Status})
	}
	s.emit(ev)
	// The messages that offered to revoke it are brought up to date by a
	// worker (the revocation is recorded whether or not this wakes).
	if err := s.store.WakeAt(ctx, op.Ref(), "sync", s.now()); err != nil {
		s.log.Warn("could not wake the message update after a revocation", "operation", op.Key, "err", err)
	}
	return s.store.Get(ctx, op.Ref())
}

// RevokeAllowanceAs is an approver's revocation (page, Slack): only an
// approver of the allowance's route may. Returns a *Refusal otherwise.
func (s *Service) RevokeAllowanceAs(ctx context.Context, id, approverID string) (*Operation, error) {
	op, err := s.load(ctx, Ref{Key: id})
	if err != nil {
		return nil, err
	}
	if !op.HasApprover(approverID) {
		return nil, &Refusal{Reason: "only an approver of this allowance may revoke it"}
	}
	return s.RevokeAllowance(ctx, id, "approver:"+approverID)
}
