package store

import (
	"context"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// One script per transition of a lease (lua/lease_*.lua).
var (
	takeLeaseScript  = redis.NewScript(lua("lease_take"))
	renewLeaseScript = redis.NewScript(lua("lease_renew"))
	dropLeaseScript  = redis.NewScript(lua("lease_drop"))
)

// Lease takes a short exclusive lease for holder, or reports how long the
// current holder keeps it.
func (r *Redis) Lease(ctx context.Context, ref approval.Ref, name, holder string, ttl time.Duration) (bool, time.Duration, error) {
	return r.lease(ctx, takeLeaseScript, ref, name, holder, msArg(ttl))
}

// LeaseAndGet is Lease, and when it is taken, Get of the operation under
// it, in one round trip.
func (r *Redis) LeaseAndGet(ctx context.Context, ref approval.Ref, name, holder string, ttl time.Duration) (bool, time.Duration, *approval.Operation, error) {
	ref, err := r.locate(ctx, ref)
	if err != nil {
		return false, 0, nil, err
	}
	tag := r.shards.of(ref.Principal)
	vals, err := takeLeaseScript.Run(ctx, r.rdb, []string{leaseKey(tag, ref.Key, name), opKey(tag, ref.Key)},
		holder, msArg(ttl)).Slice()
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
	ok, _, err := r.lease(ctx, renewLeaseScript, ref, name, holder, msArg(ttl))
	return ok, err
}

// Unlease releases a lease its holder holds.
func (r *Redis) Unlease(ctx context.Context, ref approval.Ref, name, holder string) error {
	_, _, err := r.lease(ctx, dropLeaseScript, ref, name, holder)
	return err
}

// lease runs one of the lease scripts (take, renew, drop) on ref's lease
// called name: args are the token and, but to drop, the ttl.
func (r *Redis) lease(ctx context.Context, s *redis.Script, ref approval.Ref, name string, args ...any) (bool, time.Duration, error) {
	res, err := s.Run(ctx, r.rdb, []string{leaseKey(r.shards.of(ref.Principal), ref.Key, name)}, args...).Int64Slice()
	if err != nil {
		return false, 0, unavailable("lease", err)
	}
	return res[0] == 1, time.Duration(max(res[1], 0)) * time.Millisecond, nil
}
