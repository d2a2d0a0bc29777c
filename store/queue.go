package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// The work queue is a Redis Stream read by one consumer group: every
// replica's workers share it, each entry goes to one consumer, and an entry
// left unacknowledged by a consumer that died is claimed by another after
// ClaimIdle. Future wake-ups wait in a sorted set until FireDue moves them
// onto the stream.

// Wake queues the operation for the workers now.
func (r *Redis) Wake(ctx context.Context, key string) error {
	return unavailable("wake", r.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: streamKey(), MaxLen: 100000, Approx: true, Values: []any{"op", key},
	}).Err())
}

// WakeAt queues the operation at t. Wake-ups for the same reason replace
// each other.
func (r *Redis) WakeAt(ctx context.Context, key, reason string, t time.Time) error {
	return unavailable("wake at", r.rdb.ZAdd(ctx, timersKey(), redis.Z{
		Score: float64(t.UnixMilli()), Member: key + "|" + reason,
	}).Err())
}

// FireDue moves due wake-ups onto the stream, atomically, so that replicas
// firing at the same moment never queue one twice.
func (r *Redis) FireDue(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for {
		n, err := fireScript.Run(ctx, r.rdb, []string{timersKey(), streamKey()}, now.UnixMilli(), 200).Int()
		if err != nil {
			return total, unavailable("fire timers", err)
		}
		total += n
		if n < 200 {
			return total, nil
		}
	}
}

func (r *Redis) ensureGroup(ctx context.Context) error {
	r.groupMu.Lock()
	defer r.groupMu.Unlock()
	if r.groupOK {
		return nil
	}
	err := r.rdb.XGroupCreateMkStream(ctx, streamKey(), groupName, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return unavailable("create consumer group", err)
	}
	r.groupOK = true
	return nil
}

// lostGroup forgets the group after NOGROUP (the stream was deleted, e.g.
// by a flush) so the next call creates it again.
func (r *Redis) lostGroup(err error) {
	if strings.HasPrefix(err.Error(), "NOGROUP") {
		r.groupMu.Lock()
		r.groupOK = false
		r.groupMu.Unlock()
	}
}

// Next returns the next task for consumer: first any task abandoned by a
// dead consumer, then new ones, blocking up to Block.
func (r *Redis) Next(ctx context.Context, consumer string) (approval.Task, error) {
	if err := r.ensureGroup(ctx); err != nil {
		return approval.Task{}, err
	}
	msgs, _, err := r.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: streamKey(), Group: groupName, Consumer: consumer, MinIdle: r.ClaimIdle, Start: "0-0", Count: 1,
	}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		r.lostGroup(err)
		return approval.Task{}, unavailable("claim task", err)
	}
	if len(msgs) == 0 {
		streams, err := r.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: groupName, Consumer: consumer, Streams: []string{streamKey(), ">"}, Count: 1, Block: r.Block,
		}).Result()
		if errors.Is(err, redis.Nil) {
			return approval.Task{}, nil
		}
		if err != nil {
			r.lostGroup(err)
			return approval.Task{}, unavailable("read task", err)
		}
		for _, s := range streams {
			msgs = append(msgs, s.Messages...)
		}
	}
	if len(msgs) == 0 {
		return approval.Task{}, nil
	}
	op, _ := msgs[0].Values["op"].(string)
	return approval.Task{ID: msgs[0].ID, Operation: op}, nil
}

// Done acknowledges and deletes a task.
func (r *Redis) Done(ctx context.Context, t approval.Task) error {
	pipe := r.rdb.Pipeline()
	pipe.XAck(ctx, streamKey(), groupName, t.ID)
	pipe.XDel(ctx, streamKey(), t.ID)
	_, err := pipe.Exec(ctx)
	return unavailable("ack task", err)
}
