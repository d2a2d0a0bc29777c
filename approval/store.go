package approval

import (
	"context"
	"time"
)

// Ref names an operation in the store: its key and the principal that owns
// it. The store keeps each principal's operations with its quotas and its
// work queue, so that a transition and its accounting are one atomic step.
// A Ref without a principal is located by its key first (one more lookup,
// for the paths that start from a key alone: links, Slack, operators).
type Ref struct {
	Principal string
	Key       string
}

// Ref returns the operation's store reference.
func (op *Operation) Ref() Ref { return Ref{Principal: op.Principal, Key: op.Key} }

// Store is every port the Service needs from its store, each a small
// interface named for its use. NewService takes them all at once: a store
// that lacks one does not compile, so no use case is skipped at run time.
// Every method that changes an operation is one atomic step, conditional on
// the current status, and carries a transition id (Tx): a repeated call
// with the same id is recognised as done, never a second effect, and a
// repeated transition with another id is a no-op. Implementations:
// store.Redis.
//
// Failures of the store itself are returned as unavailable errors and mean
// nothing was written unless the method says otherwise.
type Store interface {
	OperationStore
	StandingStore
	TransitionStore
	ExecutionStore
	AllowanceStore
	LinkStore
	DeliveryStore
	LeaseStore
	WakeStore
	LiveStore     // inbox.go
	OperatorStore // admin.go
	Noter         // stepup.go
	PasskeyStore  // stepup.go
	CallbackStore // callback.go
}

// OperationStore keeps operations and reads them: the agent's prepare,
// reads and lists.
type OperationStore interface {
	// Create stores a new draft, counted against the principal's rate
	// limit and quotas, and binds its idempotency key, in one step.
	// Returns rate_limited, quota_exceeded, invalid_input (too large for
	// its request), ErrExists (the key is taken), or a *Bound error when the
	// idempotency key is bound to an operation already.
	Create(ctx context.Context, op *Operation, t CreateTransition) error
	// Get returns the operation. Returns not_found if it does not exist.
	Get(ctx context.Context, ref Ref) (*Operation, error)
	// Read is Get counted against the principal's request rate, in the same
	// round trip. Returns rate_limited and the codes of Get.
	Read(ctx context.Context, ref Ref, perMinute int) (*Operation, error)
	// Rate counts one request of the principal. Returns rate_limited.
	Rate(ctx context.Context, principal string, perMinute int) error
	// List returns the principal's operations, newest first.
	List(ctx context.Context, principal string, limit int) ([]*Operation, error)
	// Events returns the operation's audit trail, oldest first.
	Events(ctx context.Context, ref Ref) ([]Event, error)
	// Ping checks that the store is reachable.
	Ping(ctx context.Context) error
}

// StandingStore answers a long-poll's counted read with where the operation
// stands, and decodes the rest only when asked (Wait).
type StandingStore interface {
	// ReadStanding is Read; full returns the whole operation from the
	// same read (and the error Read would have returned for it).
	ReadStanding(ctx context.Context, ref Ref, perMinute int) (Standing, func() (*Operation, error), error)
}

// TransitionStore moves operations through their life before execution: send,
// decide, cancel, expire, edit, escalate, remind.
type TransitionStore interface {
	// Send moves a draft to pending_approval with its jobs and wakes the
	// workers. Returns the status before the call (draft when it moved)
	// and, when the store answers with it, the operation as the call left
	// it (nil: read it); or rate_limited (sends per minute) or
	// quota_exceeded (max_pending).
	Send(ctx context.Context, ref Ref, t SendTransition) (Status, *Operation, error)
	// Decide records one approver's decision. See DecideResult.
	Decide(ctx context.Context, ref Ref, t DecideTransition) (DecideResult, error)
	// Cancel ends a draft or pending operation. Returns the status before
	// the call and whether it moved.
	Cancel(ctx context.Context, ref Ref, t Step) (Status, bool, error)
	// Expire ends an operation whose window has passed. Returns the status
	// before the call and whether it moved.
	Expire(ctx context.Context, ref Ref, t Step) (Status, bool, error)
	// Stale fails a pending operation whose target changed. Returns the
	// status before the call and whether it moved.
	Stale(ctx context.Context, ref Ref, t StaleTransition) (Status, bool, error)
	// SweepExpired ends every operation whose window passed by now, in
	// batches; it returns the expired events it recorded.
	SweepExpired(ctx context.Context, now time.Time, t SweepTransition) ([]Event, error)
	// Supersede ends a pending operation as superseded by t.Next, which it
	// stores sent (pending, or approved when the editor's approval makes
	// the quorum), in one step. False when the operation is no longer
	// pending or the editor decided it already.
	Supersede(ctx context.Context, ref Ref, t SupersedeTransition) (bool, error)
	// Escalate adds approvers, with their jobs, to a pending operation once.
	// Returns whether this call (or its retry) escalated it.
	Escalate(ctx context.Context, ref Ref, t EscalateTransition) (bool, error)
	// Remind records reminder t.N of a pending operation once, with the
	// jobs that re-notify. Returns whether this call (or its retry) did.
	Remind(ctx context.Context, ref Ref, t RemindTransition) (bool, error)
}

// ExecutionStore keeps the execution of approved operations: the claim, its
// fence, the outcome, an operator's settlement, the link to an undo.
type ExecutionStore interface {
	// Executing lists operations claimed before the given time and still
	// executing (the stuck ones), oldest first.
	Executing(ctx context.Context, before time.Time, limit int) ([]*Operation, error)
	// Claim moves an approved operation to executing for the holder of
	// t.Token. Reports whether this call (or its retry) won the claim.
	Claim(ctx context.Context, ref Ref, t ClaimTransition) (bool, Status, error)
	// Finish records the outcome of a claimed operation; only the claimer's
	// token may. When an operator settled it first, t.Late is recorded
	// beside the settled outcome instead and late is true. Returns
	// invalid_state when the token does not hold it.
	Finish(ctx context.Context, ref Ref, t FinishTransition) (late bool, err error)
	// Fence re-checks, atomically, that the claim token still holds the
	// executing operation and its lease has not passed on the store's
	// clock, and renews the lease for ttl when it holds. Called by the
	// executor right before each effect and periodically while it runs.
	// Returns unavailable when the store does not answer.
	Fence(ctx context.Context, ref Ref, token string, ttl time.Duration) (FenceResult, Status, error)
	// Settle records an operator's outcome for an executing operation.
	// Returns the status before the call and whether it moved.
	Settle(ctx context.Context, ref Ref, t SettleTransition) (Status, bool, error)
	// SetUndoneBy links a succeeded operation to the operation undoing it,
	// if its current link is prev ("" for none); false otherwise.
	SetUndoneBy(ctx context.Context, ref Ref, prev, undo string, now time.Time) (bool, error)
}

// AllowanceStore keeps standing allowances (allowance.go).
type AllowanceStore interface {
	// AddAllowance activates an allowance (once; again is a no-op).
	AddAllowance(ctx context.Context, a Allowance) error
	// Allowances lists a principal's allowances that are neither revoked
	// nor past their time, with what is left of their budgets.
	Allowances(ctx context.Context, principal string) ([]*Allowance, error)
	// RevokeAllowance ends the allowance of a succeeded allowance.grant
	// operation, recording t's event on it. False if it was revoked before.
	RevokeAllowance(ctx context.Context, ref Ref, t Step) (bool, error)
}

// LinkStore keeps the issued approval links of pending operations, and reads
// an operation with one of its links in one step (every approval page
// request opens both).
type LinkStore interface {
	// AddCapability stores an issued link's nonce hash while the operation
	// is pending, and marks the approver's earlier links through the same
	// channel replaced. Returns false if it no longer is pending.
	AddCapability(ctx context.Context, ref Ref, nonceHash string, c Capability, now time.Time) (bool, error)
	// Capability returns the stored link record, or nil.
	Capability(ctx context.Context, ref Ref, nonceHash string) (*Capability, error)
	// GetLink is Get and Capability at once: the operation, and the link
	// record of nonceHash or nil. Returns the codes of Get.
	GetLink(ctx context.Context, ref Ref, nonceHash string) (*Operation, *Capability, error)
}

// DeliveryStore records the notification jobs of an operation: delivered,
// failed and retried, and the status each message last showed.
type DeliveryStore interface {
	// RecordDelivery records that a job was delivered; false if it already
	// was. When it records it, it may answer with the operation as it left
	// it (nil: read it).
	RecordDelivery(ctx context.Context, ref Ref, d Delivery, ev Event) (bool, *Operation, error)
	// FailDelivery records a failed attempt at a job: the job's lease is
	// held for the backoff, a retry is scheduled, and the attempt is
	// audited. Returns the attempt number and the wait before the retry;
	// attempt 0 when the job is recorded as delivered (another worker
	// delivered it while this one was paused past its lease): then nothing
	// is recorded or scheduled.
	FailDelivery(ctx context.Context, ref Ref, job string, least time.Duration, ev Event) (int, time.Duration, error)
	// MarkSynced records the status a delivered message was last updated
	// to; false if it already showed that status.
	MarkSynced(ctx context.Context, ref Ref, job string, mark string) (bool, error)
}

// LeaseStore keeps the short exclusive leases on parts of an operation's work
// (one notification job), and takes one and reads the operation under it in
// one step (a notification job looks again under its lease).
type LeaseStore interface {
	// Lease takes a short exclusive lease named name on part of the
	// operation's work (one notification job) for holder. Returns false,
	// and how long the lease still runs, if someone else holds it.
	Lease(ctx context.Context, ref Ref, name, holder string, ttl time.Duration) (bool, time.Duration, error)
	// RenewLease extends a lease its holder still holds; false if it lost it.
	RenewLease(ctx context.Context, ref Ref, name, holder string, ttl time.Duration) (bool, error)
	// Unlease releases a lease its holder holds.
	Unlease(ctx context.Context, ref Ref, name, holder string) error
	// LeaseAndGet is Lease, then, when this call took it, Get: the
	// operation as it stands under the lease. Returns the codes of Get,
	// with the lease taken.
	LeaseAndGet(ctx context.Context, ref Ref, name, holder string, ttl time.Duration) (bool, time.Duration, *Operation, error)
}

// WakeStore wakes the workers and the waiters: the live changes of
// operations.
type WakeStore interface {
	// Wake asks the workers to look at the operation now.
	Wake(ctx context.Context, ref Ref) error
	// WakeAt asks the workers to look at the operation at t (a retry).
	// Wake-ups for the same reason replace each other.
	WakeAt(ctx context.Context, ref Ref, reason string, t time.Time) error
	// Changes returns a channel that receives after every change of the
	// operation (from any replica) until cancel is called.
	Changes(ctx context.Context, key string) (ch <-chan struct{}, cancel func(), err error)
}

// Standing is where an operation stands: what a long-poll compares.
type Standing struct {
	Principal string
	Status    Status
	Version   int64
	ExpiresAt time.Time
}

// Queue hands woken operations to workers, at least once.
type Queue interface {
	// Consume runs workers that call handle for each woken operation until
	// ctx ends, then waits for them. A task whose handle returns nil is
	// acknowledged; one that fails is left to be retried (by any replica,
	// after a short idle time). While handle runs, the task stays claimed
	// by this process (its lease is renewed), so no replica takes over
	// work that is in progress.
	Consume(ctx context.Context, consumer string, workers int, handle func(context.Context, Task) error)
	// FireDue queues the wake-ups due at or before now; returns how many.
	FireDue(ctx context.Context, now time.Time) (int, error)
}

// Task is one wake-up of an operation.
type Task struct {
	ID  string
	Ref Ref
}

// ErrExists is returned by Store.Create when the key is taken.
var ErrExists = Errorf(CodeInvalidState, "operation exists")

// Bound is returned by Store.Create when the idempotency key is bound to an
// operation already.
type Bound struct {
	Operation   string
	PayloadHash string
}

func (b *Bound) Error() string { return "idempotency key bound to " + b.Operation }

// Quotas bound what one principal may keep and do (SPEC §3 guarantee 10).
type Quotas struct {
	MaxDrafts      int   // drafts not yet sent
	MaxPending     int   // sent and not yet ended
	MaxStoredBytes int64 // what its operations occupy in the store, until deleted
	// RequestsPerMinute bounds REST and MCP calls together; SendsPerMinute
	// bounds sends (each reaches humans).
	RequestsPerMinute int
	SendsPerMinute    int
}

// Default quotas (SPEC §5).
var DefaultQuotas = Quotas{MaxDrafts: 200, MaxPending: 50, MaxStoredBytes: 32 << 20,
	RequestsPerMinute: 600, SendsPerMinute: 30}

// Step is what every transition carries.
type Step struct {
	// Tx identifies the call: its retry carries the same id.
	Tx    string
	Now   time.Time
	Event Event
	// Retention is how long an operation that ends here is kept;
	// DraftRetention how long a draft that ends unsent is kept.
	Retention      time.Duration
	DraftRetention time.Duration
}

// CreateTransition stores a draft.
type CreateTransition struct {
	Step
	// TTL is how long the draft's keys live: its window plus the draft
	// retention.
	TTL    time.Duration
	Quotas Quotas
	// MaxBytes bounds the stored operation (4 × the request + 64 KiB);
	// larger is invalid_input.
	MaxBytes int64
}

// SendTransition is draft → pending_approval.
type SendTransition struct {
	Step
	ExpiresAt time.Time
	Jobs      []Job
	TTL       time.Duration // how long the operation's keys live from now
	Quotas    Quotas
	// ExpireEvent is recorded instead when the draft's window has passed.
	ExpireEvent Event
	// Timers are scheduled in the same step (reminders, escalation).
	Timers []Timer
	// Spend, when set, is an allowance that approves it at once if its
	// budget, checked and spent in the same step, still holds; then
	// AllowedEvents are recorded (the allowance's approval, and approved)
	// instead of notifying anyone.
	Spend         *Spend
	AllowedEvents []Event
}

// Timer is a wake-up of the operation for a reason at a time.
type Timer struct {
	Reason string
	At     time.Time
}

// SupersedeTransition replaces a pending operation by a new version. Its
// Step's event is the original's "superseded".
type SupersedeTransition struct {
	Step
	Next           *Operation // pending, with its key, input, preview, route and expiry
	Prepared, Sent Event      // the new version's first events
	Jobs           []Job
	TTL            time.Duration // how long the new version's keys live
	Timers         []Timer
	Changed        []string // the fields the edit changed
	Editor         string   // the approver who edited
	// Approval, when set, is the editor's approval of the new version,
	// with its event; QuorumEvent is recorded when it makes the quorum.
	Approval      *Decision
	ApprovalEvent Event
	QuorumEvent   Event
}

// EscalateTransition adds approvers to a pending operation.
type EscalateTransition struct {
	Step
	Escalated Escalated
	Jobs      []Job
}

// RemindTransition records a reminder.
type RemindTransition struct {
	Step
	N    int
	Jobs []Job
}

// DecideTransition records one decision.
type DecideTransition struct {
	Step
	Decision Decision
	Approve  bool
	Required int
	// NonceHash, when set, is the link used; it must be stored for this approver.
	NonceHash string
	// QuorumEvent is appended too when this approval reaches quorum.
	QuorumEvent Event
	// ExpireEvent is appended when the window turns out to have passed.
	ExpireEvent Event
}

// ClaimTransition is approved → executing.
type ClaimTransition struct {
	Step
	Token       string
	ExpireEvent Event
	// Lease is how long the claim holds on the store's own clock unless
	// the claimer renews it (Fence); 0 for no lease.
	Lease time.Duration
}

// FinishTransition is executing → succeeded or failed, by the claimer.
type FinishTransition struct {
	Step
	Token  string
	To     Status
	Result []byte
	Error  *OpError
	// Late and LateEvent are recorded instead when an operator settled the
	// operation first: the terminal state stays, the outcome is kept
	// beside it (Operation.LateOutcome) with an audit event late_outcome.
	Late      *LateOutcome
	LateEvent Event
}

// SettleTransition is executing → succeeded or failed, by an operator.
type SettleTransition struct {
	Step
	To    Status
	Error *OpError
	// Unknown settles it as outcome unknown: allowed while the claimer's
	// lease is live. Otherwise the store refuses while the lease is live.
	Unknown bool
}

// FenceResult is the answer of a re-check of a claim.
type FenceResult int

const (
	// FenceHeld: the claim is still the caller's; its lease was renewed.
	FenceHeld FenceResult = iota
	// FenceLost: the operation is no longer executing under this claim
	// (an operator settled it).
	FenceLost
	// FenceExpired: the claim's lease passed on the store's clock; it is
	// never renewed again, and no effect may start under it.
	FenceExpired
)

// StaleTransition fails a pending operation with stale_state.
type StaleTransition struct {
	Step
	Error *OpError
}

// SweepTransition is the expiry of every operation found past its window.
type SweepTransition struct {
	Retention      time.Duration
	DraftRetention time.Duration
	Event          Event // names no operation
}

// DecideResult is the outcome of a decision.
type DecideResult struct {
	Outcome DecideOutcome
	Status  Status // the status after the call
	// Operation is the operation as the call left it, when the store
	// answers with it (nil: read it).
	Operation *Operation
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
