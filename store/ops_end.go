package store

import (
	"context"
	"errors"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// Cancel ends a draft or pending operation.
func (r *Redis) Cancel(ctx context.Context, ref approval.Ref, t approval.Step) (approval.Status, bool, error) {
	res, err := reply(r.run(ctx, cancelScript, ref, t.Tx, t.Now, encodeEvent(t.Event, t.Event.PayloadHash),
		msArg(t.Retention), msArg(t.DraftRetention)))
	return moved(ref, "cancel", res, err, "canceled", "")
}

// Expire ends an operation found past its window.
func (r *Redis) Expire(ctx context.Context, ref approval.Ref, t approval.Step) (approval.Status, bool, error) {
	res, err := reply(r.run(ctx, expireScript, ref, t.Tx, t.Now, encodeEvent(t.Event, t.Event.PayloadHash),
		msArg(t.Retention), msArg(t.DraftRetention)))
	return moved(ref, "expire", res, err, "expired", "")
}

// Stale fails a pending operation whose target changed.
func (r *Redis) Stale(ctx context.Context, ref approval.Ref, t approval.StaleTransition) (approval.Status, bool, error) {
	res, err := reply(r.run(ctx, staleScript, ref, t.Tx, t.Now, jsonOrEmpty(t.Error),
		encodeEvent(t.Event, t.Event.PayloadHash), msArg(t.Retention)))
	return moved(ref, "stale", res, err, "failed", approval.StatusPending)
}

// SweepExpired expires every shard's operations past their window.
func (r *Redis) SweepExpired(ctx context.Context, now time.Time, t approval.SweepTransition) ([]approval.Event, error) {
	const batch = 200
	t.Event.Time = now.UTC()
	ev := encodeEvent(t.Event, t.Event.PayloadHash)
	var out []approval.Event
	for _, tag := range r.shards.tags {
		for {
			pairs, err := r.runDurable(ctx, "sweep", sweepScript, tag, []string{dueKey(tag), streamKey(tag), goneKey(tag), auditKey(tag)},
				ms(now), batch, msArg(t.Retention), msArg(t.DraftRetention), ev,
				opKeyPrefix(tag), eventsKeyPrefix(tag), countersKeyPrefix(tag)).StringSlice()
			if err != nil && !errors.Is(err, redis.Nil) {
				return out, unavailable("sweep", err)
			}
			for i := 0; i+4 < len(pairs); i += 5 {
				e := t.Event
				e.Operation, e.PayloadHash, e.Action = pairs[i], pairs[i+1], pairs[i+2]
				e.Principal, e.From = pairs[i+3], approval.Status(pairs[i+4])
				out = append(out, e)
			}
			if len(pairs)/5 < batch {
				break
			}
		}
	}
	return out, nil
}
