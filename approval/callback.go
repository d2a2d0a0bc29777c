package approval

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Status webhooks (SPEC §5, callback_url): every status change of a
// principal's operations is POSTed to the principal's callback, signed, at
// least once and in order per operation. The changes are read from the
// operation's own trail, so nothing extra is stored per change: the store
// keeps only a cursor (how many changes were delivered) and the attempt
// count of the next one. Deliveries run in the workers, under a lease per
// operation (one deliverer at a time keeps the order), and a failure is
// retried through the timer set with backoff: no goroutine waits.

// StatusChange is one status change of an operation, as its principal's
// status webhook receives it.
type StatusChange struct {
	// ID is the same on every retry of this change ("op_….3"): receivers
	// de-duplicate by it.
	ID        string
	Seq       int // 1 for the operation's first change after prepare
	Operation string
	Action    string
	Status    Status
	Previous  Status
	At        time.Time
	// Code is the error code of a failed operation; OutcomeUnknown says,
	// for execution_failed, whether the effect may have happened.
	Code           string
	OutcomeUnknown *bool
}

// Callbacks delivers status changes to principals' webhooks.
type Callbacks interface {
	// Has reports whether the principal has a status webhook.
	Has(principal string) bool
	// Post delivers one change. An error means it was not acknowledged
	// (a *RetryAfterError asks for a wait); it is retried.
	Post(ctx context.Context, principal string, c StatusChange) error
}

// CallbackStore is the store's part in status webhooks, part of Store.
type CallbackStore interface {
	// CallbackSent records that change seq (from 1) reached the webhook;
	// only the next change moves the cursor. False if it was recorded
	// before, or the operation is gone.
	CallbackSent(ctx context.Context, ref Ref, seq int) (bool, error)
	// FailCallback records a failed attempt at the next change: the
	// "callback" lease is held for the backoff (at least least) and a
	// retry is scheduled at now plus the wait. Returns the attempt number and the wait.
	FailCallback(ctx context.Context, ref Ref, now time.Time, least time.Duration) (int, time.Duration, error)
}

// callbackLease serialises an operation's deliveries.
const callbackLease = "callback"

// stage orders statuses along the lifecycle: a status change always moves
// forward, so an event that repeats an older status (one written from a
// stale read) is no change.
func stage(s Status) int {
	switch s {
	case StatusDraft:
		return 0
	case StatusPending:
		return 1
	case StatusApproved:
		return 2
	case StatusExecuting:
		return 3
	case "":
		return -1
	}
	return 4 // terminal
}

// StatusChanges lists the status changes in an operation's trail after
// its creation, oldest first.
func StatusChanges(op *Operation, trail []Event) []StatusChange {
	var out []StatusChange
	prev := Status("")
	for _, ev := range trail {
		if stage(ev.Status) <= stage(prev) {
			continue
		}
		if ev.Status == StatusDraft { // its creation: the agent had the answer
			prev = ev.Status
			continue
		}
		c := StatusChange{Seq: len(out) + 1, Operation: op.Key, Action: op.Action, Status: ev.Status,
			Previous: prev, At: ev.Time}
		c.ID = op.Key + "." + strconv.Itoa(c.Seq)
		if ev.Status == StatusFailed {
			c.Code = ev.Outcome
			if op.Error != nil {
				c.Code, c.OutcomeUnknown = string(op.Error.Code), op.Error.OutcomeUnknown
			}
		}
		out = append(out, c)
		prev = ev.Status
	}
	return out
}

// hasCallback reports whether op's principal follows its operations by
// webhook.
func (s *Service) hasCallback(principal string) bool {
	return s.callbacks != nil && s.callbackStore != nil && s.callbacks.Has(principal)
}

// callback delivers op's status changes that its principal's webhook has
// not acknowledged yet, in order. Receiver failures are retried later with
// backoff; only store failures are returned.
func (s *Service) callback(ctx context.Context, op *Operation) error {
	if !s.hasCallback(op.Principal) || op.Status == StatusDraft {
		return nil
	}
	// A change recorded while another worker held the lease found it
	// taken; the holder looks once more after releasing it, so that change
	// does not wait for the lease's expiry.
	for range 4 {
		holder := s.holder + "." + RandomToken(5)
		got, left, err := s.store.Lease(ctx, op.Ref(), callbackLease, holder, jobLease)
		if err != nil {
			return err
		}
		if !got {
			// Another worker delivers, or the last attempt is backing off:
			// look again when the lease runs out, so no change waits for a
			// wake-up that was spent here. A reason of its own: it must not
			// replace (and so postpone) the retry a failure schedules.
			return s.store.WakeAt(ctx, op.Ref(), callbackLease+"-held", s.now().Add(left+100*time.Millisecond))
		}
		stop := s.keepLease(ctx, op.Ref(), callbackLease, holder)
		seen, failed, err := s.deliverChanges(ctx, op.Ref())
		stop()
		if failed || err != nil || seen == nil {
			return err // a failure holds the lease for its backoff
		}
		if err := s.store.Unlease(ctx, op.Ref(), callbackLease, holder); err != nil {
			return err
		}
		now, err := s.store.Get(ctx, op.Ref())
		if err != nil || now.Version == seen.Version {
			return ignoreNotFound(err)
		}
	}
	// Still changing: look again shortly rather than after a contender's
	// wait for the lease to run out.
	return s.store.WakeAt(ctx, op.Ref(), callbackLease+"-held", s.now().Add(100*time.Millisecond))
}

func ignoreNotFound(err error) error {
	if ErrorCode(err) == CodeNotFound {
		return nil
	}
	return err
}

// deliverChanges posts the undelivered changes under the lease and returns
// the operation as it read it (nil when it is gone). failed is true when a
// post failed and its retry was scheduled (the lease then holds the
// backoff).
func (s *Service) deliverChanges(ctx context.Context, ref Ref) (seen *Operation, failed bool, err error) {
	// Read the cursor and the trail under the lease: another worker may
	// have delivered since op was read.
	cur, err := s.store.Get(ctx, ref)
	if err != nil {
		return nil, false, ignoreNotFound(err)
	}
	trail, err := s.store.Events(ctx, ref)
	if err != nil {
		return nil, false, ignoreNotFound(err)
	}
	changes := StatusChanges(cur, trail)
	for _, c := range changes[min(cur.CallbacksSent, len(changes)):] {
		perr := s.callbacks.Post(ctx, ref.Principal, c)
		if perr != nil {
			var least time.Duration
			var ra *RetryAfterError
			if errors.As(perr, &ra) {
				least = ra.After
			}
			attempt, wait, ferr := s.callbackStore.FailCallback(ctx, ref, s.now(), least)
			if ferr != nil {
				return cur, false, ferr
			}
			s.log.Warn("status webhook failed; will retry", "operation", ref.Key, "principal", ref.Principal,
				"event_id", c.ID, "status", c.Status, "attempt", attempt, "retry_in", wait, "err", SafeError(perr))
			s.callbackOutcome("failed")
			return cur, true, nil
		}
		if _, err := s.callbackStore.CallbackSent(ctx, ref, c.Seq); err != nil {
			return cur, false, err
		}
		s.callbackOutcome("delivered")
	}
	return cur, false, nil
}

func (s *Service) callbackOutcome(outcome string) {
	if s.onCallback != nil {
		s.onCallback(outcome)
	}
}
