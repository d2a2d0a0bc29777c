package store

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Allow counts one attempt against a fixed-window limit shared by all
// replicas (failed link attempts per client address); it reports whether
// the attempt is within the limit and, if not, how long until the window
// resets.
func (r *Redis) Allow(ctx context.Context, bucket string, limit int, window time.Duration) (bool, time.Duration, error) {
	res, err := limitScript.Run(ctx, r.rdb, []string{limitKey(bucket)}, msArg(window)).Int64Slice()
	if err != nil {
		return false, 0, unavailable("limit", err)
	}
	return res[0] <= int64(limit), time.Duration(res[1]) * time.Millisecond, nil
}

// Count reads the current count of a limit without adding to it.
func (r *Redis) Count(ctx context.Context, bucket string) (int, time.Duration, error) {
	pipe := r.rdb.Pipeline()
	g := pipe.Get(ctx, limitKey(bucket))
	t := pipe.PTTL(ctx, limitKey(bucket))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, unavailable("limit", err)
	}
	n, _ := g.Int()
	return n, t.Val(), nil
}

// Once reports whether name is seen for the first time within ttl.
func (r *Redis) Once(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	ok, err := r.rdb.SetNX(ctx, onceKey(name), "1", ttl).Result()
	return ok, unavailable("once", err)
}

// Usage is what a principal holds against its quotas now.
type Usage struct {
	Drafts, Pending int
	StoredBytes     int64
}

// Usage reads a principal's quota counters.
func (r *Redis) Usage(ctx context.Context, principal string) (Usage, error) {
	h, err := r.rdb.HMGet(ctx, countersKey(r.shards.of(principal), principal), "nd", "np", "nb").Result()
	if err != nil {
		return Usage{}, unavailable("usage", err)
	}
	n := func(v any) int64 {
		s, _ := v.(string)
		x, _ := strconv.ParseInt(s, 10, 64)
		return x
	}
	return Usage{Drafts: int(n(h[0])), Pending: int(n(h[1])), StoredBytes: n(h[2])}, nil
}
