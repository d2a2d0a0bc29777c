package store

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

var (
	_ approval.LiveStore = (*Redis)(nil)
	_ approval.Noter     = (*Redis)(nil)
)

var noteScript = opScript("note")

// Live lists the operations that may still be decided or run (drafts,
// pending and approved ones) from every shard's due index, soonest
// expiry first, at most limit per shard: the cost follows the live
// operations, not everything stored (the approver inbox reads it).
func (r *Redis) Live(ctx context.Context, limit int) ([]*approval.Operation, error) {
	ops, err := r.fromEveryShard(ctx, "live", func(pipe redis.Pipeliner, tag string) *redis.StringSliceCmd {
		return pipe.ZRange(ctx, dueKey(tag), 0, int64(limit-1))
	})
	return slices.DeleteFunc(ops, func(op *approval.Operation) bool { return op == nil }), err
}

// fromEveryShard reads the operations that one query of each shard's
// sorted sets names (members "key|principal"), in one pipeline and one
// read of them all; an operation gone meanwhile is nil.
func (r *Redis) fromEveryShard(ctx context.Context, what string, query func(redis.Pipeliner, string) *redis.StringSliceCmd) ([]*approval.Operation, error) {
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(r.shards.tags))
	for i, tag := range r.shards.tags {
		cmds[i] = query(pipe, tag)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable(what, err)
	}
	var refs []approval.Ref
	for _, c := range cmds {
		for _, m := range c.Val() {
			if k, p, ok := strings.Cut(m, "|"); ok {
				refs = append(refs, approval.Ref{Principal: p, Key: k})
			}
		}
	}
	ops, _, err := r.getMany(ctx, refs)
	return ops, err
}

// Note appends ev to the operation's audit trail and its shard's chain
// without changing the operation. Returns not_found.
func (r *Redis) Note(ctx context.Context, ref approval.Ref, ev approval.Event) error {
	ref, err := r.locate(ctx, ref)
	if err != nil {
		return err
	}
	// The event carries the operation's own payload hash, which the
	// stored form leaves out.
	n, err := r.run(ctx, noteScript, ref, approval.RandomToken(8), ev.Time, encodeEvent(ev, ev.PayloadHash)).Int()
	if err != nil {
		return unavailable("note", err)
	}
	if n == 0 {
		return notFound(ref.Key)
	}
	return nil
}

// NoteFree adds an event that belongs to no operation to the audit chain
// of the principal's shard.
func (r *Redis) NoteFree(ctx context.Context, principal string, ev approval.Event) error {
	return unavailable("note", r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: auditKey(r.shards.of(principal)),
		Values: []any{"k", "", "h", "", "e", encodeEvent(ev, "")}}).Err())
}
