package approval

import (
	"context"
	"time"
)

// Store keeps operations. Every method that changes an operation is one
// atomic step, conditional on the current status; a repeated transition
// is a no-op, never a second effect. Implementations: store.Redis.
//
// Failures of the store itself are returned as unavailable errors and mean
// nothing was written unless the method says otherwise.
type Store interface {
	// Create stores a new draft and indexes it for its principal. If an
	// operation with this key exists it is left alone and ErrExists is
	// returned (the caller lost an idempotency race and reads the winner).
	Create(ctx context.Context, op *Operation, ev Event, ttl time.Duration) error
	// BindIdempotency binds (principal, idempotency key) to b unless
	// already bound, and returns the binding in force and whether it is new.
	BindIdempotency(ctx context.Context, principal, key string, b IdemBinding, ttl time.Duration) (IdemBinding, bool, error)
	// Get returns the operation. Returns not_found if it does not exist.
	Get(ctx context.Context, key string) (*Operation, error)
	// List returns the principal's operations, newest first.
	List(ctx context.Context, principal string, limit int) ([]*Operation, error)
	// Events returns the operation's audit trail, oldest first.
	Events(ctx context.Context, key string) ([]Event, error)

	// Send moves a draft to pending_approval with its jobs and new expiry.
	// Returns the status before the call (draft when it moved).
	Send(ctx context.Context, key string, t SendTransition) (Status, error)
	// Decide records one approver's decision. See DecideResult.
	Decide(ctx context.Context, key string, t DecideTransition) (DecideResult, error)
	// Move changes status from one of t.From to t.To, recording result and
	// error. Returns the status before the call and whether it moved.
	Move(ctx context.Context, key string, t MoveTransition) (Status, bool, error)

	// AddCapability stores an issued link's nonce hash while the operation
	// is pending. Returns false if it no longer is.
	AddCapability(ctx context.Context, key, nonceHash string, c Capability, now time.Time) (bool, error)
	// Capability returns the stored link record, or nil.
	Capability(ctx context.Context, key, nonceHash string) (*Capability, error)
	// RecordDelivery records that a job was delivered; false if it already was.
	RecordDelivery(ctx context.Context, key string, d Delivery, ev Event) (bool, error)
	// MarkSynced records the status a delivered message was last updated
	// to; false if it already showed that status.
	MarkSynced(ctx context.Context, key, job string, s Status) (bool, error)
	// Lease takes a short exclusive lease named name on the operation
	// (e.g. one notification job) so that concurrent workers do not both
	// deliver it. Returns false, and how long the lease still runs, if
	// someone else holds it.
	Lease(ctx context.Context, key, name string, ttl time.Duration) (bool, time.Duration, error)
	// Unlease releases a lease early.
	Unlease(ctx context.Context, key, name string) error
	// HoldLease sets a lease to expire after ttl, whoever held it (a
	// failed delivery keeps it for its backoff).
	HoldLease(ctx context.Context, key, name string, ttl time.Duration) error
	// SetUndoneBy links a succeeded operation to the operation undoing it,
	// if its current link is prev ("" for none); false otherwise.
	SetUndoneBy(ctx context.Context, key, prev, undo string) (bool, error)

	// Wake records that the operation needs the workers' attention soon.
	// Callers record it before a transition that creates work, so that a
	// crash between the two leaves work to do, never lost work.
	Wake(ctx context.Context, key string) error
	// WakeAt records that the operation needs attention at t (a retry or
	// the end of its window).
	WakeAt(ctx context.Context, key, reason string, t time.Time) error
	// Changes returns a channel that receives after every change of the
	// operation (from any replica) until cancel is called.
	Changes(key string) (ch <-chan struct{}, cancel func())
	// Ping checks that the store is reachable.
	Ping(ctx context.Context) error
}

// Queue hands woken operations to workers, at least once.
type Queue interface {
	// Next blocks until an operation needs attention or ctx ends.
	Next(ctx context.Context, consumer string) (Task, error)
	// Done acknowledges a task.
	Done(ctx context.Context, t Task) error
	// FireDue queues the wake-ups due at or before now; returns how many.
	FireDue(ctx context.Context, now time.Time) (int, error)
}

// Task is one wake-up of an operation.
type Task struct {
	ID        string
	Operation string
}

// IdemBinding is what an idempotency key is bound to.
type IdemBinding struct {
	Operation   string `json:"operation_key"`
	PayloadHash string `json:"payload_hash"`
}

// ErrExists is returned by Store.Create when the key is taken.
var ErrExists = Errorf(CodeInvalidState, "operation exists")

// SendTransition is draft → pending_approval.
type SendTransition struct {
	Now       time.Time
	ExpiresAt time.Time
	Jobs      []Job
	Event     Event
	TTL       time.Duration // how long the operation's keys live from now
}

// DecideTransition records one decision.
type DecideTransition struct {
	Now      time.Time
	Decision Decision
	Approve  bool
	Required int
	// NonceHash, when set, is the link used; it must be stored for this approver.
	NonceHash string
	Event     Event
	// QuorumEvent is appended too when this approval reaches quorum.
	QuorumEvent Event
	// ExpireEvent is appended when the window turns out to have passed.
	ExpireEvent Event
	Retention   time.Duration
}

// DecideResult is the outcome of a decision.
type DecideResult struct {
	Outcome DecideOutcome
	Status  Status // the status after the call
}

// DecideOutcome says what a decision did.
type DecideOutcome string

const (
	DecideRecorded       DecideOutcome = "recorded" // counted; quorum not yet reached
	DecideApproved       DecideOutcome = "approved" // this approval reached quorum
	DecideRejected       DecideOutcome = "rejected"
	DecideAlreadyDecided DecideOutcome = "already_decided" // this approver decided before
	DecideNotPending     DecideOutcome = "not_pending"     // the operation is not awaiting decisions
	DecideExpired        DecideOutcome = "expired"         // the window had passed; now recorded expired
	DecideHashMismatch   DecideOutcome = "hash_mismatch"
	DecideUnknownLink    DecideOutcome = "unknown_link" // no such capability for this approver
)

// MoveTransition is any other change of status.
type MoveTransition struct {
	From []Status
	To   Status
	Now  time.Time
	// Unexpired requires the window not to have passed (claiming); an
	// expirable operation found past its window is moved to expired instead
	// and ExpireEvent is recorded.
	Unexpired   bool
	ExpireEvent Event
	Result      []byte
	Error       *OpError
	Rejection   *Decision
	Event       Event
	TTL         time.Duration
}
