package approval

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Fencing an executor (SPEC §2, §3 guarantee 3). A claim holds for a lease
// on the store's own clock (Redis TIME), renewed while its executor runs.
// Right before each effect (every remote write, every bulk item, an email
// handed to SMTP, a Slack post) the action re-checks the claim through
// CheckClaim: one script answers whether the operation is still executing
// under this claim and its lease has not passed, and renews it. A process
// paused for any length of time (a VM freeze, a GC stop, SIGSTOP) stops
// renewing; once its lease has passed, no re-check of that claim ever
// succeeds again, so it writes nothing after it resumes. An operator may
// say what happened (succeeded or failed) only after the lease passed;
// while it is live they may settle it only as outcome unknown.
//
// What a re-check cannot stop is an effect already past it: the window
// between the store's answer and the first byte on the wire. The HTTP
// action re-checks on its write connection's first write, after dialing
// (action/httpreq/client.go), which leaves only the TLS handshake and the
// write itself. An outcome that still arrives after a settlement is kept
// as the operation's late outcome, never lost.

// DefaultExecutionLease is how long a claim holds without renewal.
const DefaultExecutionLease = 15 * time.Second

// MinExecutionLease and MaxExecutionLease bound settings.execution_lease.
const (
	MinExecutionLease = 2 * time.Second
	MaxExecutionLease = 5 * time.Minute
)

// ErrClaimLost is matched (errors.Is) by every ClaimLostError.
var ErrClaimLost = errors.New("the execution's claim is lost")

// ClaimLostError is what CheckClaim returns when an effect must not start:
// an operator settled the operation, or the claim's lease passed (the
// executor was paused or cut off from the store for longer than it).
type ClaimLostError struct {
	// Status is the operation's status when it was settled, "" when the
	// lease passed (or could not be confirmed) while it was executing.
	Status Status
}

func (e *ClaimLostError) Error() string {
	if e.Status != "" && e.Status != StatusExecuting {
		return fmt.Sprintf("an operator settled the operation (%s) while it was being executed, so countersign did not send it", e.Status)
	}
	return "the execution's lease ran out before it could send (the process was paused or cut off from the store), so countersign did not send it"
}

func (e *ClaimLostError) Is(target error) bool { return target == ErrClaimLost }

// ClaimLostExecError is the execution error an action reports when its
// re-check failed before anything was sent.
func ClaimLostExecError(err error) *ExecError {
	return &ExecError{Code: CodeExecutionFailed, Message: SafeError(err) + "; nothing was sent",
		Details: map[string]any{"phase": "fence"}}
}

type fenceKey struct{}

// WithClaimCheck returns a context whose CheckClaim calls check.
func WithClaimCheck(ctx context.Context, check func(context.Context) error) context.Context {
	return context.WithValue(ctx, fenceKey{}, check)
}

// CheckClaim re-checks, right before an effect, that the execution ctx
// belongs to still holds its claim; it returns a ClaimLostError (errors.Is
// ErrClaimLost) when the effect must not start. Outside an execution it
// returns nil.
func CheckClaim(ctx context.Context) error {
	if f, ok := ctx.Value(fenceKey{}).(func(context.Context) error); ok {
		return f(ctx)
	}
	return nil
}

// fencer re-checks and renews one claim.
type fencer struct {
	s     *Service
	ref   Ref
	token string
	lease time.Duration

	mu   sync.Mutex
	held time.Time // when the store last confirmed the claim (local, monotonic)
	lost error
}

func (s *Service) newFencer(ref Ref, token string, claimed time.Time) *fencer {
	return &fencer{s: s, ref: ref, token: token, lease: s.execLease, held: claimed}
}

// check is CheckClaim for this claim. While the store does not answer it
// asks again, for as long as the lease could still hold; past that it
// gives up (no effect starts on an unconfirmed claim).
func (f *fencer) check(ctx context.Context) error {
	f.mu.Lock()
	lost := f.lost
	f.mu.Unlock()
	if lost != nil {
		return lost
	}
	wait := 50 * time.Millisecond
	for {
		err := f.once(ctx)
		if err == nil || ErrorCode(err) != CodeUnavailable {
			return err
		}
		f.mu.Lock()
		since := time.Since(f.held)
		f.mu.Unlock()
		if since > f.lease || ctx.Err() != nil {
			return f.lose(&ClaimLostError{})
		}
		sleep(ctx, wait)
		wait = min(wait*2, time.Second)
	}
}

// once asks the store once; it returns unavailable errors as they are.
func (f *fencer) once(ctx context.Context) error {
	asked := time.Now()
	res, st, err := f.s.store.Fence(ctx, f.ref, f.token, f.lease)
	switch {
	case err != nil && ErrorCode(err) == CodeUnavailable:
		return err
	case err != nil:
		return f.lose(&ClaimLostError{})
	case res == FenceHeld:
		f.mu.Lock()
		f.held = asked // the lease runs from no later than the question
		f.mu.Unlock()
		return nil
	case res == FenceExpired:
		return f.lose(&ClaimLostError{Status: StatusExecuting})
	}
	return f.lose(&ClaimLostError{Status: st})
}

func (f *fencer) lose(err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost == nil {
		f.lost = err
		f.s.log.Warn("execution claim lost; nothing more is sent", "operation", f.ref.Key, "err", err)
	}
	return f.lost
}

// settled returns the terminal status a re-check found the operation
// settled in, "" when none did.
func (f *fencer) settled() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	var cl *ClaimLostError
	if errors.As(f.lost, &cl) && cl.Status != StatusExecuting {
		return cl.Status
	}
	return ""
}

// keep renews the lease every third of it while the action runs; stop ends
// the renewal and waits for it.
func (f *fencer) keep(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(f.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f.mu.Lock()
				lost := f.lost
				f.mu.Unlock()
				if lost != nil {
					return
				}
				if err := f.once(ctx); err != nil && ErrorCode(err) == CodeUnavailable {
					f.s.log.Warn("renewing the execution lease failed", "operation", f.ref.Key, "err", err)
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
