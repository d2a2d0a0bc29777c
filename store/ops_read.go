package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// Get reads an operation in one round trip.
func (r *Redis) Get(ctx context.Context, ref approval.Ref) (*approval.Operation, error) {
	ref, h, err := r.getHash(ctx, ref)
	if err != nil {
		return nil, err
	}
	return r.decode(ref.Key, h)
}

// getHash reads an operation's hash, locating it first if ref has no
// principal.
func (r *Redis) getHash(ctx context.Context, ref approval.Ref) (approval.Ref, map[string]string, error) {
	ref, err := r.locate(ctx, ref)
	if err != nil {
		return ref, nil, err
	}
	tag := r.shards.of(ref.Principal)
	var cmd *redis.MapStringStringCmd
	if err := r.readDurable(ctx, "get", tag, func(p redis.Pipeliner) { cmd = p.HGetAll(ctx, opKey(tag, ref.Key)) }); err != nil {
		return ref, nil, err
	}
	h, err := cmd.Result()
	if err != nil {
		return ref, nil, unavailable("get", err)
	}
	return ref, h, nil
}

// Read is Get counted against the principal's request rate, in one round
// trip. When Redis refuses writes (out of memory), the read still works,
// uncounted: reads must keep working while writes cannot.
func (r *Redis) Read(ctx context.Context, ref approval.Ref, perMinute int) (*approval.Operation, error) {
	ref, h, err := r.readHash(ctx, ref, perMinute)
	if err != nil {
		return nil, err
	}
	return r.decode(ref.Key, h)
}

// ReadStanding is Read that decodes only where the operation stands;
// full decodes all of it from the same reply. A long-poll needs no more
// until the operation changes.
func (r *Redis) ReadStanding(ctx context.Context, ref approval.Ref, perMinute int) (approval.Standing, func() (*approval.Operation, error), error) {
	ref, h, err := r.readHash(ctx, ref, perMinute)
	if err != nil {
		return approval.Standing{}, nil, err
	}
	if len(h) == 0 {
		return approval.Standing{}, nil, notFound(ref.Key)
	}
	v, _ := strconv.ParseInt(h["v"], 10, 64)
	st := approval.Standing{Principal: cmp.Or(h["p"], principalOf(h["d"])), Status: approval.Status(h["st"]), Version: v, ExpiresAt: fromMS(h["x"])}
	return st, func() (*approval.Operation, error) { return r.decode(ref.Key, h) }, nil
}

// readHash is Read's round trip: the operation's hash, the request
// counted.
func (r *Redis) readHash(ctx context.Context, ref approval.Ref, perMinute int) (approval.Ref, map[string]string, error) {
	if perMinute <= 0 || ref.Principal == "" {
		return r.getHash(ctx, ref)
	}
	tag := r.shards.of(ref.Principal)
	// Durable like a transition: what the agent is shown must be on the
	// replicas, or a failover could show it an earlier status next
	// (SPEC §2: nothing returns to an earlier state).
	vals, err := r.runDurable(ctx, "read", readScript, tag, []string{opKey(tag, ref.Key), countersKey(tag, ref.Principal)},
		perMinute).Slice()
	if oom(err) {
		return r.getHash(ctx, ref)
	}
	if err != nil {
		return ref, nil, unavailable("read", err)
	}
	if wait, _ := vals[0].(int64); wait > 0 {
		return ref, nil, rateLimited("requests", perMinute, time.Duration(wait)*time.Millisecond)
	}
	return ref, flat(vals[1]), nil
}

// Rate counts one request of a principal.
func (r *Redis) Rate(ctx context.Context, principal string, perMinute int) error {
	if perMinute <= 0 {
		return nil
	}
	wait, err := rateScript.Run(ctx, r.rdb, []string{countersKey(r.shards.of(principal), principal)},
		perMinute).Int64()
	if oom(err) {
		return nil // counting is a write; reads must work while Redis refuses writes
	}
	if err != nil {
		return unavailable("rate", err)
	}
	if wait > 0 {
		return rateLimited("requests", perMinute, time.Duration(wait)*time.Millisecond)
	}
	return nil
}

func (r *Redis) decode(key string, h map[string]string) (*approval.Operation, error) {
	if len(h) == 0 {
		return nil, notFound(key)
	}
	op, err := decodeOp(key, h)
	if err != nil {
		r.decodeFailed(err)
		return nil, err
	}
	return op, nil
}

// decodeFailed reports a stored record that cannot be read: logged with
// its key and field, never its content, and counted (OnDecodeError).
// Reads that list many operations skip it after this; reads of the one
// operation return the error.
func (r *Redis) decodeFailed(err error) {
	var de *DecodeError
	if !errors.As(err, &de) {
		de = &DecodeError{Err: err}
	}
	r.log.Error("stored operation is unreadable", "operation", de.Key, "field", de.Field, "reason", decodeReason(de.Err))
	if r.OnDecodeError != nil {
		r.OnDecodeError(de.Key)
	}
}

// locate fills in the principal of a Ref given by key alone: it asks every
// shard at once whether it holds the key.
func (r *Redis) locate(ctx context.Context, ref approval.Ref) (approval.Ref, error) {
	if ref.Principal != "" {
		return ref, nil
	}
	if p := r.owners.get(ref.Key); p != "" {
		return approval.Ref{Principal: p, Key: ref.Key}, nil
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(r.shards.tags))
	for i, tag := range r.shards.tags {
		cmds[i] = pipe.HMGet(ctx, opKey(tag, ref.Key), "d", "p")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return ref, unavailable("locate", err)
	}
	for _, c := range cmds {
		vals, err := c.Result()
		if err != nil || len(vals) != 2 {
			continue
		}
		d, _ := vals[0].(string)
		p, _ := vals[1].(string) // stored before the doc held it
		if d != "" && p == "" {
			p = principalOf(d)
		}
		if p != "" {
			r.owners.put(ref.Key, p)
			return approval.Ref{Principal: p, Key: ref.Key}, nil
		}
	}
	return ref, notFound(ref.Key)
}

// getMany reads several operations in one round trip; missing ones are
// nil, and so are unreadable ones, which decode reported and which
// unreadable lists.
func (r *Redis) getMany(ctx context.Context, refs []approval.Ref) (ops []*approval.Operation, unreadable map[int]bool, err error) {
	cmds := make([]*redis.MapStringStringCmd, len(refs))
	queue := func(pipe redis.Pipeliner) {
		for i, ref := range refs {
			cmds[i] = pipe.HGetAll(ctx, opKey(r.shards.of(ref.Principal), ref.Key))
		}
	}
	if tag, one := r.oneTag(refs); one {
		// One principal's operations (a list): read where transitions
		// are durable, like Get.
		if err := r.readDurable(ctx, "get", tag, queue); err != nil {
			return nil, nil, err
		}
	} else {
		pipe := r.rdb.Pipeline()
		queue(pipe)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, unavailable("get", err)
		}
	}
	out := make([]*approval.Operation, len(refs))
	for i, c := range cmds {
		h, err := c.Result()
		if err != nil {
			return nil, nil, unavailable("get", err)
		}
		if len(h) == 0 {
			continue
		}
		if out[i], err = r.decode(refs[i].Key, h); err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				return nil, nil, err
			}
			// Reported (logged and counted) by decode: one unreadable
			// operation must not make every list of its principal, the
			// inbox or the stuck scan fail.
			out[i] = nil
			if unreadable == nil {
				unreadable = map[int]bool{}
			}
			unreadable[i] = true
		}
	}
	return out, unreadable, nil
}

// oneTag returns the shard of refs when they all share one.
func (r *Redis) oneTag(refs []approval.Ref) (string, bool) {
	if len(refs) == 0 {
		return "", false
	}
	tag := r.shards.of(refs[0].Principal)
	for _, ref := range refs[1:] {
		if r.shards.of(ref.Principal) != tag {
			return "", false
		}
	}
	return tag, true
}

// List returns the principal's operations, newest first, from its index.
func (r *Redis) List(ctx context.Context, principal string, limit int) ([]*approval.Operation, error) {
	idx := indexKey(r.shards.of(principal), principal)
	keys, err := r.rdb.ZRevRange(ctx, idx, 0, int64(limit-1)).Result()
	if err != nil {
		return nil, unavailable("list", err)
	}
	refs := make([]approval.Ref, len(keys))
	for i, k := range keys {
		refs[i] = approval.Ref{Principal: principal, Key: k}
	}
	ops, unreadable, err := r.getMany(ctx, refs)
	if err != nil {
		return nil, err
	}
	out := make([]*approval.Operation, 0, len(ops))
	var gone []any
	for i, op := range ops {
		if op == nil {
			if !unreadable[i] { // an unreadable one stays listed for its repair
				gone = append(gone, keys[i])
			}
			continue
		}
		out = append(out, op)
	}
	if len(gone) > 0 { // deleted after retention
		r.rdb.ZRem(ctx, idx, gone...)
	}
	return out, nil
}

// All lists the operations of the given principals, newest first, at most
// limit of them (for operators).
func (r *Redis) All(ctx context.Context, principals []string, limit int) ([]*approval.Operation, error) {
	var out []*approval.Operation
	for _, p := range principals {
		ops, err := r.List(ctx, p, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, ops...)
	}
	slices.SortFunc(out, func(a, b *approval.Operation) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(a.Key, b.Key))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Executing lists operations claimed before the given time and still
// executing, from every shard's executing index, oldest first.
func (r *Redis) Executing(ctx context.Context, before time.Time, limit int) ([]*approval.Operation, error) {
	ops, err := r.fromEveryShard(ctx, "executing", func(pipe redis.Pipeliner, tag string) *redis.StringSliceCmd {
		return pipe.ZRangeByScore(ctx, executingKey(tag), &redis.ZRangeBy{
			Min: "-inf", Max: strconv.FormatInt(ms(before), 10), Count: int64(limit)})
	})
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(ops, func(op *approval.Operation) bool {
		return op == nil || op.Status != approval.StatusExecuting
	})
	slices.SortFunc(out, func(a, b *approval.Operation) int {
		return cmp.Or(a.ClaimedAt.Compare(*b.ClaimedAt), strings.Compare(a.Key, b.Key))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Events returns the audit trail.
func (r *Redis) Events(ctx context.Context, ref approval.Ref) ([]approval.Event, error) {
	ref, err := r.locate(ctx, ref)
	if err != nil {
		return nil, err
	}
	tag := r.shards.of(ref.Principal)
	pipe := r.rdb.Pipeline()
	list := pipe.LRange(ctx, eventsKey(tag, ref.Key), 0, -1) // where operations stored before kept them
	fields := pipe.HMGet(ctx, opKey(tag, ref.Key), "ph", "ev")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("events", err)
	}
	ph, _ := fields.Val()[0].(string)
	raw := list.Val()
	if trail, _ := fields.Val()[1].(string); trail != "" {
		raw = append(raw, strings.Split(trail, "\n")...)
	}
	out := make([]approval.Event, 0, len(raw))
	for _, v := range raw {
		e, err := decodeEvent(v, ref.Key, ph)
		if err != nil {
			err = &DecodeError{Key: ref.Key, Field: "events", Err: err}
			r.decodeFailed(err)
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
