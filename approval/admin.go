package approval

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"
)

// Operator is a person (an on-call rota, an SRE) allowed the admin API:
// every principal's operations, cancel, and settling an operation left
// executing. An operator never decides an operation: approving stays with
// the route's approvers. Operator keys and principal keys are disjoint
// (config refuses a hash used twice), and each works on its own API only.
type Operator struct {
	ID      string
	KeyHash string // lowercase hex SHA-256 of the operator key
	// Email and OIDCSubject name the operator when they sign in to the
	// console (approval/signin.go); either may be empty.
	Email       string
	OIDCSubject string
}

// OperatorByKeyHash finds the operator whose key hashes to h.
func (p *Policy) OperatorByKeyHash(h string) *Operator {
	for _, o := range p.Operators {
		if o.KeyHash == h {
			return o
		}
	}
	return nil
}

// DefaultStuckAfter is how long an operation may be executing before it
// is reported as stuck: to operators (ops list --stuck) and to the agent
// (next_step says a human must settle it).
const DefaultStuckAfter = 5 * time.Minute

// MaxAdminList bounds one admin listing.
const MaxAdminList = 1000

// MaxNoteLength bounds an operator's reconcile note (characters).
const MaxNoteLength = 2000

// Stuck reports whether op has been executing for longer than after, as
// of now: the process that claimed it most likely died, and the outcome
// is unknown until an operator checks the target.
func Stuck(op *Operation, now time.Time, after time.Duration) bool {
	if op.Status != StatusExecuting {
		return false
	}
	since := op.UpdatedAt
	if op.ClaimedAt != nil {
		since = *op.ClaimedAt
	}
	return now.Sub(since) > after
}

// OperatorStore lists every operation for the admin use cases: their
// port, part of Store.
type OperatorStore interface {
	// All returns the operations of the given principals, newest first,
	// at most limit.
	All(ctx context.Context, principals []string, limit int) ([]*Operation, error)
}

// AuthenticateOperator finds the operator of an operator key. Returns
// unauthenticated; a principal's API key is no operator key.
func (s *Service) AuthenticateOperator(key string) (*Operator, error) {
	if key == "" {
		return nil, Errorf(CodeUnauthenticated, "missing operator key: send Authorization: Bearer <operator key>")
	}
	h := strings.TrimPrefix(SHA256Hex([]byte(key)), "sha256:")
	if o := s.policy.OperatorByKeyHash(h); o != nil {
		return o, nil
	}
	if s.policy.PrincipalByKeyHash(h) != nil {
		return nil, Errorf(CodeUnauthenticated, "this is an agent's API key; the admin API takes an operator key (policy file operators:)")
	}
	return nil, Errorf(CodeUnauthenticated, "unknown operator key")
}

// AdminQuery selects operations for an operator.
type AdminQuery struct {
	Status    Status // "" for any
	Principal string // "" for every principal
	// Stuck keeps only operations executing for longer than OlderThan
	// (DefaultStuckAfter when zero).
	Stuck     bool
	OlderThan time.Duration
	Limit     int // default and maximum MaxAdminList
}

// AdminList returns every principal's operations (or one principal's),
// newest first; stuck ones oldest first. Returns invalid_input for an
// unknown status, or a status other than executing with Stuck.
func (s *Service) AdminList(ctx context.Context, _ *Operator, q AdminQuery) ([]*Operation, error) {
	var fe FieldErrors
	if q.Status != "" && !q.Status.Valid() {
		fe.Add("status", "unknown status %q; one of %s", q.Status, statusList())
	}
	if q.Stuck && q.Status != "" && q.Status != StatusExecuting {
		fe.Add("status", "stuck operations are executing; leave status out or use executing")
	}
	if q.OlderThan < 0 {
		fe.Add("older_than_seconds", "must not be negative")
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	if q.Limit <= 0 || q.Limit > MaxAdminList {
		q.Limit = MaxAdminList
	}
	if q.Stuck {
		after := q.OlderThan
		if after == 0 {
			after = DefaultStuckAfter
		}
		return s.StuckOperations(ctx, q.Principal, after, q.Limit)
	}
	ops, err := s.all(ctx, q.Principal, q.Limit)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := []*Operation{}
	for _, op := range ops {
		if q.Status == "" || op.EffectiveStatus(now) == q.Status {
			out = append(out, op)
		}
	}
	return out, nil
}

// StuckOperations lists the operations executing for longer than after
// (of one principal, or all), oldest first. It is the one place that
// finds them, so that the store's index can replace the scan behind it.
func (s *Service) StuckOperations(ctx context.Context, principal string, after time.Duration, limit int) ([]*Operation, error) {
	// The store's executing index: the cost follows the stuck operations,
	// not everything stored.
	now := s.now()
	ops, err := s.store.Executing(ctx, now.Add(-after), MaxAdminList)
	if err != nil {
		return nil, err
	}
	out := []*Operation{}
	for _, op := range ops {
		if (principal == "" || op.Principal == principal) && Stuck(op, now, after) {
			out = append(out, op)
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *Service) all(ctx context.Context, principal string, limit int) ([]*Operation, error) {
	var ids []string
	for _, p := range s.policy.Principals {
		if principal == "" || p.ID == principal {
			ids = append(ids, p.ID)
		}
	}
	return s.store.All(ctx, ids, limit)
}

// AdminGet returns any principal's operation and its audit trail.
// Returns not_found.
func (s *Service) AdminGet(ctx context.Context, _ *Operator, key string) (*Operation, []Event, error) {
	op, err := s.Get(ctx, nil, key)
	if err != nil {
		return nil, nil, err
	}
	evs, err := s.store.Events(ctx, op.Ref())
	if err != nil {
		return nil, nil, err
	}
	return op, evs, nil
}

// AdminCancel cancels any principal's draft or pending operation, recorded
// in the audit as done by "operator:<id>". Returns not_found, invalid_state.
func (s *Service) AdminCancel(ctx context.Context, o *Operator, key string) (*Operation, error) {
	return s.cancel(ctx, nil, key, "operator:"+o.ID)
}

// ReconcileCall is an operator's settlement of an operation left executing
// (the body of POST /v1/admin/operations/{key}/reconcile).
type ReconcileCall struct {
	Outcome Status `json:"outcome"`
	Note    string `json:"note"`
}

// AdminReconcile settles an operation left executing (Settle), recorded in
// the audit as done by "operator:<id>" with the note. outcome is
// succeeded, failed or OutcomeUnknown; succeeded and failed are refused
// with invalid_state (details.lease_remaining_seconds) while the
// executor's lease is live. Returns invalid_input (outcome, note),
// not_found, invalid_state.
func (s *Service) AdminReconcile(ctx context.Context, o *Operator, key string, outcome Status, note string) (*Operation, error) {
	var fe FieldErrors
	if outcome != StatusSucceeded && outcome != StatusFailed && outcome != OutcomeUnknown {
		fe.Add("outcome", "must be succeeded or failed (what the target shows happened, once the executor's lease has run out), or unknown")
	}
	note = strings.TrimSpace(note)
	switch {
	case note == "":
		fe.Add("note", "required: say what you checked (it is kept in the audit)")
	case utf8.RuneCountInString(note) > MaxNoteLength:
		fe.Add("note", "longer than %d characters", MaxNoteLength)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return s.Settle(ctx, key, outcome, o.ID, note)
}

func statusList() string {
	names := make([]string, len(Statuses))
	for i, st := range Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// AdminView is an operation as operators see it: the agent's view plus
// whose it is, when it last changed, and whether it is stuck. Like the
// agent's view it never holds a capability.
type AdminView struct {
	View
	Principal  string    `json:"principal"`
	OnBehalfOf string    `json:"on_behalf_of,omitempty"`
	Route      string    `json:"route"`
	UpdatedAt  time.Time `json:"updated_at"`
	Stuck      bool      `json:"stuck"`
	// LeaseUntil is when the executor's claim runs out unless it renews
	// it; LeaseLive whether it had not yet, as of now (then the operation
	// may be settled only as unknown).
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	LeaseLive  bool       `json:"lease_live,omitempty"`
}

// OperatorView renders op for an operator as of now.
func OperatorView(op *Operation, now time.Time) AdminView {
	v := AdminView{View: AgentView(op, now), Principal: op.Principal, OnBehalfOf: op.OnBehalfOf,
		Route: op.Route.Name, UpdatedAt: op.UpdatedAt, Stuck: Stuck(op, now, DefaultStuckAfter)}
	if op.Status == StatusExecuting && op.LeaseUntil != nil {
		v.LeaseUntil, v.LeaseLive = op.LeaseUntil, op.LeaseUntil.After(now)
	}
	return v
}
