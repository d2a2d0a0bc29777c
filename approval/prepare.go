package approval

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
)

// PrepareRequest is an agent's request to prepare an operation.
type PrepareCall struct {
	Action         string          `json:"action"`
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

var idemPattern = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)

// Prepare validates, normalizes, applies policy and stores a draft. It
// reaches no human and changes nothing remote. created is false when the
// idempotency key returned an existing operation.
//
// Returns unknown_action, invalid_input, insufficient_scope,
// policy_denied, no_route, idempotency_key_reused or unavailable; nothing
// is stored on any error.
func (s *Service) Prepare(ctx context.Context, p *Principal, req PrepareCall) (op *Operation, created bool, err error) {
	return s.prepare(ctx, p, req, "")
}

// prepare counts the request against the principal's rate in the script
// that stores the draft; a request refused before that point is counted on
// its own, and so is one whose action reads remote state first, before the
// read: no request escapes the rate limit.
func (s *Service) prepare(ctx context.Context, p *Principal, req PrepareCall, undoes string) (*Operation, bool, error) {
	quotas := p.Limits()
	if _, remote := optional[Rechecker](s.actions[req.Action]); remote {
		if err := s.store.Rate(ctx, p.ID, quotas.RequestsPerMinute); err != nil {
			return nil, false, err
		}
		quotas.RequestsPerMinute = 0
	}
	op, ev, err := s.draft(ctx, p, req, undoes)
	if err != nil {
		if quotas.RequestsPerMinute > 0 {
			if rerr := s.store.Rate(ctx, p.ID, quotas.RequestsPerMinute); rerr != nil {
				return nil, false, rerr
			}
		}
		return nil, false, err
	}
	// Guarantee 10: what is kept is bounded by what was asked.
	request := int64(len(req.Input) + len(req.Action) + len(req.IdempotencyKey) + 64)
	err = s.store.Create(ctx, op, CreateTransition{
		Step: s.step(ev), TTL: s.draftTTL + s.draftRetention, Quotas: quotas, MaxBytes: 4*request + 64<<10,
	})
	var bound *Bound
	switch {
	case errors.As(err, &bound):
		if bound.PayloadHash != op.PayloadHash {
			return nil, false, Errorf(CodeIdempotencyKeyReused, "idempotency key %q was used for a different request", req.IdempotencyKey).
				WithDetails(map[string]any{"operation_key": bound.Operation})
		}
		existing, err := s.store.Get(ctx, Ref{Principal: p.ID, Key: bound.Operation})
		if err != nil {
			return nil, false, err
		}
		return existing, false, nil
	case err != nil:
		return nil, false, err
	}
	s.emit(ev)
	return op, true, nil
}

// draft validates and normalizes a request into a draft and its event,
// without storing anything.
func (s *Service) draft(ctx context.Context, p *Principal, req PrepareCall, undoes string) (*Operation, Event, error) {
	action, ok := s.actions[req.Action]
	if !ok {
		return nil, Event{}, Errorf(CodeUnknownAction, "no such action %q; available: %s", req.Action, strings.Join(s.ActionNames(), ", ")).
			WithDetails(map[string]any{"available": s.ActionNames()})
	}
	if req.IdempotencyKey != "" && !idemPattern.MatchString(req.IdempotencyKey) {
		return nil, Event{}, FieldErrors{{Field: "idempotency_key", Reason: "must be 1-128 printable ASCII characters without spaces"}}.Err()
	}
	// An undo is drafted from an operation the principal owns, with input
	// from that action's Undoer rather than the agent: the scope that let
	// the principal prepare the original covers its compensation.
	base := req.Action
	if sb, ok := action.(ScopeBaser); ok && sb.ScopeBase() != "" {
		base = sb.ScopeBase()
	}
	if undoes == "" && req.Action != GrantAction && !p.AllowsAction(base) {
		return nil, Event{}, Errorf(CodeInsufficientScope, "principal %s may not prepare %s", p.ID, req.Action)
	}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		return nil, Event{}, FieldErrors{{Field: "input", Reason: "required"}}.Err()
	}
	// Guarantee 13, once for every action: no value of the input has two
	// names, and no number changes when canonicalized. Deep input is left
	// to the action, which refuses it in its own words (and is refused
	// here if it does not).
	depthErr := CheckJSONDepth(req.Input, "")
	if depthErr == nil {
		if err := CheckJSONMembers(req.Input, ""); err != nil {
			return nil, Event{}, err
		}
	}
	prep, err := action.Prepare(ctx, PrepareRequest{Principal: p, Input: req.Input})
	if err != nil {
		return nil, Event{}, err
	}
	if depthErr != nil {
		return nil, Event{}, depthErr
	}
	if err := checkEscapeGrowth(prep.Preview, len(req.Input)); err != nil {
		return nil, Event{}, err
	}
	scope := prep.Scope
	if scope == "" {
		scope = req.Action
	}
	if undoes == "" && !p.Allows(scope) {
		return nil, Event{}, Errorf(CodeInsufficientScope, "principal %s may not prepare %s", p.ID, scope).
			WithDetails(map[string]any{"scope": scope})
	}
	input, err := Canonical(prep.Input)
	if err != nil {
		return nil, Event{}, err
	}
	hash, err := PayloadHash(req.Action, input, p.ID)
	if err != nil {
		return nil, Event{}, err
	}
	attrs := map[string]string{}
	for k, v := range prep.Attrs {
		attrs[k] = v
	}
	route, err := s.policy.Resolve(req.Action, p, attrs)
	if err != nil {
		return nil, Event{}, err
	}

	now := s.now().UTC()
	op := &Operation{
		Key: NewOperationKey(), Action: req.Action, Principal: p.ID, OnBehalfOf: p.OnBehalfOf,
		Input: input, PayloadHash: hash, Preview: prep.Preview, State: prep.State, Route: route,
		IdempotencyKey: req.IdempotencyKey, Undoes: undoes, CreatedAt: now,
		Status: StatusDraft, ExpiresAt: now.Add(s.draftTTL), UpdatedAt: now, Version: 1, Attrs: attrs,
	}
	if op.Preview.Fields == nil {
		op.Preview.Fields = []Field{}
	}
	ev := s.event(op, "prepared", "principal:"+p.ID, "")
	ev.Details = map[string]any{"route": route.Name}
	return op, ev, nil
}

// Refused counts a request that an adapter refused before it reached the
// service (a body that is not JSON): no request escapes the rate limit.
// It returns rate_limited (or unavailable) instead of err when it applies.
func (s *Service) Refused(ctx context.Context, p *Principal, err error) error {
	if rerr := s.store.Rate(ctx, p.ID, p.Limits().RequestsPerMinute); rerr != nil {
		return rerr
	}
	return err
}

// AllowsAction reports whether any scope of p covers action (with or
// without a target), so requests for actions the principal can never use
// are refused before the action does any work.
func (p *Principal) AllowsAction(action string) bool {
	for _, sc := range p.Scopes {
		if sc == "*" || sc == action || strings.HasPrefix(sc, action+":") {
			return true
		}
	}
	return false
}
