package store

import (
	"context"
	"errors"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// Decide records one decision.
func (r *Redis) Decide(ctx context.Context, ref approval.Ref, t approval.DecideTransition) (approval.DecideResult, error) {
	approve := "0"
	if t.Approve {
		approve = "1"
	}
	t.Decision.Tx = t.Tx
	cmd := r.run(ctx, decideScript, ref, t.Tx, t.Now, t.Decision.Approver, encodeDecision(t.Decision),
		approve, t.Required, t.NonceHash, t.Decision.PayloadHash, encodeEvent(t.Event, t.Decision.PayloadHash),
		encodeEvent(t.QuorumEvent, t.QuorumEvent.PayloadHash), encodeEvent(t.ExpireEvent, t.ExpireEvent.PayloadHash),
		msArg(t.Retention))
	res, err := reply(cmd)
	if err != nil {
		return approval.DecideResult{}, unavailable("decide", err)
	}
	if res[0] == "missing" {
		return approval.DecideResult{}, notFound(ref.Key)
	}
	out := approval.DecideResult{Outcome: approval.DecideOutcome(res[0]), Status: approval.Status(res[1])}
	// The script answers with the operation as it left it; one that does
	// not decode is left for the caller's own read to report.
	if vals, _ := cmd.Slice(); len(vals) > 2 {
		if h := flat(vals[2]); len(h) > 0 {
			if op, err := r.decode(ref.Key, h); err == nil {
				out.Operation = op
			}
		}
	}
	return out, nil
}

// Escalate adds approvers to a pending operation once.
func (r *Redis) Escalate(ctx context.Context, ref approval.Ref, t approval.EscalateTransition) (bool, error) {
	args := []any{mustJSON(escalated{At: ms(t.Escalated.At), Approvers: t.Escalated.Approvers}), encodeEvent(t.Event, t.Event.PayloadHash)}
	for _, j := range t.Jobs {
		args = append(args, j.ID, encodeJob(j))
	}
	res, err := reply(r.run(ctx, escalateScript, ref, t.Tx, t.Now, args...))
	if err != nil {
		return false, unavailable("escalate", err)
	}
	if res[0] == "missing" {
		return false, notFound(ref.Key)
	}
	return res[0] == "escalated", nil
}

// Remind records a reminder once.
func (r *Redis) Remind(ctx context.Context, ref approval.Ref, t approval.RemindTransition) (bool, error) {
	args := []any{t.N, encodeEvent(t.Event, t.Event.PayloadHash)}
	for _, j := range t.Jobs {
		args = append(args, j.ID, encodeJob(j))
	}
	res, err := reply(r.run(ctx, remindScript, ref, t.Tx, t.Now, args...))
	if err != nil {
		return false, unavailable("remind", err)
	}
	if res[0] == "missing" {
		return false, notFound(ref.Key)
	}
	return res[0] == "reminded", nil
}

// AddCapability stores an issued link while the operation is pending.
func (r *Redis) AddCapability(ctx context.Context, ref approval.Ref, nonceHash string, c approval.Capability, now time.Time) (bool, error) {
	n, err := r.run(ctx, capabilityScript, ref, "", now, nonceHash,
		mustJSON(capability{Approver: c.Approver, Channel: c.Channel, Expires: c.Expires.Unix()}), c.Approver, c.Channel).Int()
	if err != nil {
		return false, unavailable("add capability", err)
	}
	return n == 1, nil
}

// Capability reads a stored link record.
func (r *Redis) Capability(ctx context.Context, ref approval.Ref, nonceHash string) (*approval.Capability, error) {
	raw, err := r.rdb.HGet(ctx, opKey(r.shards.of(ref.Principal), ref.Key), "c:"+nonceHash).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("capability", err)
	}
	return r.decodeCapability(ref.Key, nonceHash, raw)
}

// GetLink reads an operation and its link record for nonceHash (nil when
// there is none) in one round trip: the record is a field of the
// operation's hash, which Get reads whole anyway.
func (r *Redis) GetLink(ctx context.Context, ref approval.Ref, nonceHash string) (*approval.Operation, *approval.Capability, error) {
	ref, err := r.locate(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	tag := r.shards.of(ref.Principal)
	var cmd *redis.MapStringStringCmd
	if err := r.readDurable(ctx, "get", tag, func(p redis.Pipeliner) { cmd = p.HGetAll(ctx, opKey(tag, ref.Key)) }); err != nil {
		return nil, nil, err
	}
	h, err := cmd.Result()
	if err != nil {
		return nil, nil, unavailable("get", err)
	}
	op, err := r.decode(ref.Key, h)
	if err != nil {
		return nil, nil, err
	}
	raw, ok := h["c:"+nonceHash]
	if !ok {
		return op, nil, nil
	}
	c, err := r.decodeCapability(ref.Key, nonceHash, raw)
	if err != nil {
		return nil, nil, err
	}
	return op, c, nil
}

func (r *Redis) decodeCapability(key, nonceHash, raw string) (*approval.Capability, error) {
	var c capability
	if err := jsonUnmarshal(raw, &c); err != nil {
		err = &DecodeError{Key: key, Field: "c:" + nonceHash, Err: err}
		r.decodeFailed(err)
		return nil, err
	}
	return &approval.Capability{Approver: c.Approver, Channel: c.Channel, Expires: time.Unix(c.Expires, 0).UTC(), Revoked: c.Revoked}, nil
}
