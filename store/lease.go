package store

import (
	"context"
	"time"

	"github.com/countersign/countersign/approval"
)

// Lease takes a short exclusive lease for holder, or reports how long the
// current holder keeps it.
func (r *Redis) Lease(ctx context.Context, ref approval.Ref, name, holder string, ttl time.Duration) (bool, time.Duration, error) {
	return r.lease(ctx, ref, name, "take", holder, ttl)
}

// LeaseAndGet is Lease, and when it is taken, Get of the operation under
// it, in one round trip.
func (r *Redis) LeaseAndGet(ctx context.Context, ref approval.Ref, name, holder string, ttl time.Duration) (bool, time.Duration, *approval.Operation, error) {
	ref, err := r.locate(ctx, ref)
	if err != nil {
		return false, 0, nil, err
	}
	tag := r.shards.of(ref.Principal)
	vals, err := leaseScript.Run(ctx, r.rdb, []string{leaseKey(tag, ref.Key, name), opKey(tag, ref.Key)},
		"take", holder, msArg(ttl)).Slice()
	if err != nil {
		return false, 0, nil, unavailable("lease", err)
	}
	got, _ := vals[0].(int64)
	left, _ := vals[1].(int64)
	if got != 1 {
		return false, time.Duration(max(left, 0)) * time.Millisecond, nil, nil
	}
	var h map[string]string
	if len(vals) > 2 {
		h = flat(vals[2])
	}
	op, err := r.decode(ref.Key, h)
	return true, 0, op, err
}

// RenewLease extends a lease its holder still holds.
func (r *Redis) RenewLease(ctx context.Context, ref approval.Ref, name, holder string, ttl time.Duration) (bool, error) {
	ok, _, err := r.lease(ctx, ref, name, "renew", holder, ttl)
	return ok, err
}

// Unlease releases a lease its holder holds.
func (r *Redis) Unlease(ctx context.Context, ref approval.Ref, name, holder string) error {
	_, _, err := r.lease(ctx, ref, name, "drop", holder, time.Millisecond)
	return err
}

func (r *Redis) lease(ctx context.Context, ref approval.Ref, name, verb, holder string, ttl time.Duration) (bool, time.Duration, error) {
	res, err := leaseScript.Run(ctx, r.rdb, []string{leaseKey(r.shards.of(ref.Principal), ref.Key, name)},
		verb, holder, msArg(ttl)).Int64Slice()
	if err != nil {
		return false, 0, unavailable("lease", err)
	}
	return res[0] == 1, time.Duration(max(res[1], 0)) * time.Millisecond, nil
}
