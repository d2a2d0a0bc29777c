package approval

import (
	"context"
	"time"
)

// MaxWaits is how many long-polls one principal may hold open at once in
// one process. Each holds a connection and a goroutine for up to 30 s, so
// without a bound the request rate alone (600 a minute by default) would
// let one agent keep hundreds open; past it, a wait is refused with
// rate_limited at once, before anything is read.
const MaxWaits = 32

// Waiting reports how many long-polls principal holds open in this process.
func (s *Service) Waiting(principal string) int {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	return s.waits[principal]
}

// holdWait takes one of the principal's long-poll places, or says none is
// free; release gives it back.
func (s *Service) holdWait(principal string) (release func(), ok bool) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if s.waits[principal] >= MaxWaits {
		return nil, false
	}
	if s.waits == nil {
		s.waits = map[string]int{}
	}
	s.waits[principal]++
	return func() {
		s.waitMu.Lock()
		defer s.waitMu.Unlock()
		if s.waits[principal]--; s.waits[principal] <= 0 {
			delete(s.waits, principal)
		}
	}, true
}

// Wait returns the operation once it changes, or after d, whichever comes
// first. An operation already terminal is returned at once. It counts as
// one request. Returns rate_limited when the principal holds MaxWaits
// long-polls open already, and the codes of Get.
func (s *Service) Wait(ctx context.Context, p *Principal, key string, d time.Duration) (*Operation, error) {
	if d <= 0 {
		return s.Get(ctx, p, key)
	}
	if !ValidOperationKey(key) {
		return nil, badKey(key)
	}
	holder := ""
	if p != nil {
		holder = p.ID
	}
	release, ok := s.holdWait(holder)
	if !ok {
		return nil, Errorf(CodeRateLimited, "%d long-polls (wait) are open already; wait for one of them to return, "+
			"or read the status without waiting", MaxWaits).WithDetails(map[string]any{"retry_after_seconds": 1})
	}
	defer release()
	ch, cancel, err := s.store.Changes(ctx, key)
	if err != nil {
		return nil, err
	}
	defer cancel()
	// Until it changes, where it stands is all a long-poll needs of it.
	sd, full, err := s.readStanding(ctx, p, key)
	if err != nil {
		return nil, err
	}
	if sd.Status.Terminal() || (sd.Status.Expirable() && !s.now().Before(sd.ExpiresAt)) {
		op, err := full()
		if err != nil {
			return nil, err
		}
		return s.current(ctx, op) // records an expiry that happened
	}
	start := sd.Version
	timer := time.NewTimer(d)
	defer timer.Stop()
	// The window may end while we wait; wake then to report expired.
	var expiry <-chan time.Time
	if sd.Status.Expirable() {
		if until := sd.ExpiresAt.Sub(s.now()); until < d {
			t := time.NewTimer(until + 10*time.Millisecond)
			defer t.Stop()
			expiry = t.C
		}
	}
	for {
		select {
		case <-ch:
			cur, err := s.own(ctx, p, key)
			if err != nil || cur.Version != start {
				return cur, err
			}
		case <-expiry:
			return s.own(ctx, p, key)
		case <-timer.C:
			return s.own(ctx, p, key)
		case <-ctx.Done():
			return full()
		case <-s.closing:
			return s.own(context.WithoutCancel(ctx), p, key)
		}
	}
}

// readStanding is Get for a long-poll: where the principal's operation
// stands, and the whole of it from the same read when asked.
func (s *Service) readStanding(ctx context.Context, p *Principal, key string) (Standing, func() (*Operation, error), error) {
	sd, full, err := s.store.ReadStanding(ctx, Ref{Principal: p.ID, Key: key}, p.Limits().RequestsPerMinute)
	if err != nil {
		return Standing{}, nil, err
	}
	if sd.Principal != p.ID {
		return Standing{}, nil, notFound(key)
	}
	return sd, full, nil
}
