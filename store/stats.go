package store

import (
	"context"
	"strconv"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// Stats are what the store holds now, for gauges. They are read from the
// quota counters and the per-shard indexes and streams: a few commands per
// principal and per shard in one round trip, never a scan of the keyspace.
type Stats struct {
	Drafts, Pending, Approved, Executing int64
	// ExpiringSoon counts pending operations whose approval window ends
	// within the horizon given to Stats (at most expiringLook per shard).
	ExpiringSoon int64
	// QueueDepth is the number of tasks queued or in progress on every
	// shard's stream; OldestTask the age of the oldest (0 when empty).
	QueueDepth int64
	OldestTask time.Duration
	// Stuck counts the operations executing for longer than
	// approval.DefaultStuckAfter (what ops list --stuck lists by default),
	// from every shard's executing index.
	Stuck int64
}

// expiringLook bounds the entries of a shard's due index that Stats looks
// at for ExpiringSoon.
const expiringLook = 500

var expiringScript = redis.NewScript(lua("expiring"))

// Stats reads the counts of the given principals' operations and of the
// work queue, as of now. Principals not listed (removed from the policy)
// are not counted.
func (r *Redis) Stats(ctx context.Context, principals []string, now time.Time, horizon time.Duration) (Stats, error) {
	pipe := r.rdb.Pipeline()
	counters := make([]*redis.SliceCmd, len(principals))
	for i, p := range principals {
		counters[i] = pipe.HMGet(ctx, countersKey(r.shards.of(p), p), "nd", "np", "nq")
	}
	type shardCmds struct {
		exec, depth, stuck *redis.IntCmd
		oldest             *redis.XMessageSliceCmd
	}
	stuckBefore := strconv.FormatInt(ms(now.Add(-approval.DefaultStuckAfter)), 10)
	shards := make([]shardCmds, len(r.shards.tags))
	for i, tag := range r.shards.tags {
		shards[i] = shardCmds{
			exec:   pipe.ZCard(ctx, executingKey(tag)),
			depth:  pipe.XLen(ctx, streamKey(tag)),
			oldest: pipe.XRangeN(ctx, streamKey(tag), "-", "+", 1),
			stuck:  pipe.ZCount(ctx, executingKey(tag), "-inf", stuckBefore),
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return Stats{}, unavailable("stats", err)
	}
	var s Stats
	var np int64
	for _, c := range counters {
		v := c.Val()
		s.Drafts += num(v, 0)
		np += num(v, 1)
		s.Approved += num(v, 2)
	}
	var oldest time.Time
	for _, sc := range shards {
		s.Executing += sc.exec.Val()
		s.QueueDepth += sc.depth.Val()
		s.Stuck += sc.stuck.Val()
		if msgs := sc.oldest.Val(); len(msgs) > 0 {
			if t, ok := streamTime(msgs[0].ID); ok && (oldest.IsZero() || t.Before(oldest)) {
				oldest = t
			}
		}
	}
	// np counts every operation sent and not yet ended: pending, approved
	// and executing.
	s.Pending = max(np-s.Approved-s.Executing, 0)
	if !oldest.IsZero() {
		s.OldestTask = max(now.Sub(oldest), 0)
	}
	for _, tag := range r.shards.tags {
		n, err := expiringScript.Run(ctx, r.rdb, []string{dueKey(tag)}, ms(now), ms(now.Add(horizon)), expiringLook, opKeyPrefix(tag)).Int64()
		if err != nil {
			return s, unavailable("stats", err)
		}
		s.ExpiringSoon += n
	}
	return s, nil
}

// num reads the i-th value of an HMGET reply as a number (0 when unset).
func num(v []any, i int) int64 {
	if i >= len(v) {
		return 0
	}
	str, _ := v[i].(string)
	n, _ := strconv.ParseInt(str, 10, 64)
	return n
}

// streamTime is when a stream entry was added: the milliseconds of its id.
func streamTime(id string) (time.Time, bool) {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			n, err := strconv.ParseInt(id[:i], 10, 64)
			return time.UnixMilli(n), err == nil
		}
	}
	return time.Time{}, false
}
