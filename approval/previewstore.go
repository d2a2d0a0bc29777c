package approval

import (
	"context"
	"log/slog"
	"time"
)

// previewing is the Service's view of its Store: the service, not the
// store, decides which previews are left out of stored operations
// (previews.Omit), and gives every operation read from the store its
// preview back (previews.Fill). The store just stores what it is given.
//
// Every Store method that writes an operation or returns one is wrapped
// here; TestPreviewingWrapsEveryOperationPort pins that list against Store.
type previewing struct {
	Store
	p   *previews
	log *slog.Logger
}

// stored is op as the store keeps it: without its preview when the action
// renders it again from the input.
func (w previewing) stored(op *Operation) *Operation {
	if op == nil || !w.p.Omit(op) {
		return op
	}
	c := *op
	c.Preview = Preview{}
	return &c
}

// fill gives op read from the store its preview; an operation whose stored
// input cannot be rendered is refused, never shown with an empty preview.
func (w previewing) fill(op *Operation, err error) (*Operation, error) {
	if err != nil || op == nil {
		return op, err
	}
	if err := w.p.Fill(op); err != nil {
		w.log.Error("stored operation cannot be rendered", "operation", op.Key, "action", op.Action)
		return nil, err
	}
	return op, nil
}

// fillAll fills a listing, leaving out the operations that cannot be
// rendered (as the store leaves out those it cannot decode).
func (w previewing) fillAll(ops []*Operation, err error) ([]*Operation, error) {
	if err != nil {
		return ops, err
	}
	out := ops[:0]
	for _, op := range ops {
		if op, ferr := w.fill(op, nil); ferr == nil {
			out = append(out, op)
		}
	}
	return out, nil
}

func (w previewing) Create(ctx context.Context, op *Operation, t CreateTransition) error {
	return w.Store.Create(ctx, w.stored(op), t)
}

func (w previewing) Supersede(ctx context.Context, ref Ref, t SupersedeTransition) (bool, error) {
	t.Next = w.stored(t.Next)
	return w.Store.Supersede(ctx, ref, t)
}

func (w previewing) Get(ctx context.Context, ref Ref) (*Operation, error) {
	return w.fill(w.Store.Get(ctx, ref))
}

func (w previewing) Read(ctx context.Context, ref Ref, perMinute int) (*Operation, error) {
	return w.fill(w.Store.Read(ctx, ref, perMinute))
}

func (w previewing) ReadStanding(ctx context.Context, ref Ref, perMinute int) (Standing, func() (*Operation, error), error) {
	sd, full, err := w.Store.ReadStanding(ctx, ref, perMinute)
	if err != nil || full == nil {
		return sd, full, err
	}
	return sd, func() (*Operation, error) { return w.fill(full()) }, nil
}

func (w previewing) List(ctx context.Context, principal string, limit int) ([]*Operation, error) {
	return w.fillAll(w.Store.List(ctx, principal, limit))
}

func (w previewing) Executing(ctx context.Context, before time.Time, limit int) ([]*Operation, error) {
	return w.fillAll(w.Store.Executing(ctx, before, limit))
}

func (w previewing) Live(ctx context.Context, limit int) ([]*Operation, error) {
	return w.fillAll(w.Store.Live(ctx, limit))
}

func (w previewing) All(ctx context.Context, principals []string, limit int) ([]*Operation, error) {
	return w.fillAll(w.Store.All(ctx, principals, limit))
}

func (w previewing) Send(ctx context.Context, ref Ref, t SendTransition) (Status, *Operation, error) {
	from, op, err := w.Store.Send(ctx, ref, t)
	if err != nil || op == nil {
		return from, op, err
	}
	if op, err = w.fill(op, nil); err != nil {
		return from, nil, nil // the caller reads it again, and that read fails
	}
	return from, op, nil
}

func (w previewing) Decide(ctx context.Context, ref Ref, t DecideTransition) (DecideResult, error) {
	r, err := w.Store.Decide(ctx, ref, t)
	if err != nil || r.Operation == nil {
		return r, err
	}
	if op, ferr := w.fill(r.Operation, nil); ferr == nil {
		r.Operation = op
	} else {
		r.Operation = nil // the decision is recorded; the caller reads it again
	}
	return r, nil
}

func (w previewing) RecordDelivery(ctx context.Context, ref Ref, d Delivery, ev Event) (bool, *Operation, error) {
	ok, op, err := w.Store.RecordDelivery(ctx, ref, d, ev)
	if err != nil || op == nil {
		return ok, op, err
	}
	if op, err = w.fill(op, nil); err != nil {
		return ok, nil, nil // recorded; the caller reads it again
	}
	return ok, op, nil
}

func (w previewing) GetLink(ctx context.Context, ref Ref, nonceHash string) (*Operation, *Capability, error) {
	op, c, err := w.Store.GetLink(ctx, ref, nonceHash)
	if op, err = w.fill(op, err); err != nil {
		return nil, nil, err
	}
	return op, c, nil
}

func (w previewing) LeaseAndGet(ctx context.Context, ref Ref, name, holder string, ttl time.Duration) (bool, time.Duration, *Operation, error) {
	got, left, op, err := w.Store.LeaseAndGet(ctx, ref, name, holder, ttl)
	op, err = w.fill(op, err)
	return got, left, op, err
}
