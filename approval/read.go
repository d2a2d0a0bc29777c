package approval

import "context"

// Get returns the principal's operation as of now, counted against its
// request rate; with a nil principal (operators), anyone's, uncounted.
// Returns not_found for unknown keys and for other principals'
// operations, and rate_limited.
func (s *Service) Get(ctx context.Context, p *Principal, key string) (*Operation, error) {
	if !ValidOperationKey(key) {
		return nil, badKey(key)
	}
	if p == nil {
		return s.load(ctx, Ref{Key: key})
	}
	op, err := s.store.Read(ctx, Ref{Principal: p.ID, Key: key}, p.Limits().RequestsPerMinute)
	if err != nil {
		return nil, err
	}
	if op.Principal != p.ID {
		return nil, notFound(key)
	}
	return s.current(ctx, op)
}

// own reads the principal's operation without counting it (a re-read
// after a transition the principal made).
func (s *Service) own(ctx context.Context, p *Principal, key string) (*Operation, error) {
	if !ValidOperationKey(key) {
		return nil, badKey(key)
	}
	op, err := s.load(ctx, Ref{Principal: p.ID, Key: key})
	if err == nil && op.Principal != p.ID {
		return nil, notFound(key)
	}
	return op, err
}

func badKey(key string) error {
	return Errorf(CodeNotFound, "no operation %q: keys look like op_ followed by 26 characters", key)
}

func notFound(key string) error {
	return Errorf(CodeNotFound, "no operation %s", key)
}

// load reads an operation and records its expiry if the window passed. A
// Ref without a principal is located by its key.
func (s *Service) load(ctx context.Context, ref Ref) (*Operation, error) {
	if !ValidOperationKey(ref.Key) {
		return nil, badKey(ref.Key)
	}
	op, err := s.store.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.current(ctx, op)
}

// current records the expiry of an operation read after its window passed.
func (s *Service) current(ctx context.Context, op *Operation) (*Operation, error) {
	if op.Status.Expirable() && op.EffectiveStatus(s.now()) == StatusExpired {
		return s.expire(ctx, op)
	}
	return op, nil
}

func (s *Service) expire(ctx context.Context, op *Operation) (*Operation, error) {
	ev := s.event(op, "expired", "system", "")
	ev.Status = StatusExpired
	if _, moved, err := s.store.Expire(ctx, op.Ref(), s.step(ev)); err != nil {
		return nil, err
	} else if moved {
		s.emit(ev)
	}
	return s.store.Get(ctx, op.Ref())
}

// MaxListInputBytes bounds the inputs one List returns (guarantee 10):
// each listed operation carries its input and a preview of about its
// size, so without it a request of a few bytes answered with 200
// operations of 200 KB each, tens of megabytes (their stored, compressed
// copies being a few KB). The newest operation is always listed.
const MaxListInputBytes = 1 << 20

// List returns the principal's operations, newest first, optionally only
// those in status: at most 200, and no more once their inputs reach
// MaxListInputBytes.
func (s *Service) List(ctx context.Context, p *Principal, status Status) ([]*Operation, error) {
	if status != "" && !status.Valid() {
		return nil, FieldErrors{{Field: "status", Reason: "unknown status " + string(status)}}.Err()
	}
	if err := s.store.Rate(ctx, p.ID, p.Limits().RequestsPerMinute); err != nil {
		return nil, err
	}
	ops, err := s.store.List(ctx, p.ID, 200)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := []*Operation{}
	size := 0
	for _, op := range ops {
		if status != "" && op.EffectiveStatus(now) != status {
			continue
		}
		if size += len(op.Input); size > MaxListInputBytes && len(out) > 0 {
			break
		}
		out = append(out, op)
	}
	return out, nil
}

// Events returns the audit trail of the principal's operation (anyone's
// for a nil principal).
func (s *Service) Events(ctx context.Context, p *Principal, key string) ([]Event, error) {
	op, err := s.Get(ctx, p, key)
	if err != nil {
		return nil, err
	}
	return s.store.Events(ctx, op.Ref())
}
