package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// The work queue is one Redis Stream per shard, read by one consumer group:
// every replica reads every shard, each entry goes to one consumer, and
// transitions add entries in the same script that changes the operation.
// A consumer renews the entries it holds every Renew; an entry it stops
// renewing (it died, or its handler failed) is taken over by any consumer
// after ClaimIdle. Future wake-ups wait in a sorted set per shard until
// FireDue moves them onto the stream.

// Wake queues the operation for the workers now.
func (r *Redis) Wake(ctx context.Context, ref approval.Ref) error {
	return unavailable("wake", r.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: streamKey(r.shards.of(ref.Principal)), MaxLen: 100000, Approx: true,
		Values: []any{"o", ref.Key, "p", ref.Principal},
	}).Err())
}

// WakeAt queues the operation at t. Wake-ups for the same reason replace
// each other.
func (r *Redis) WakeAt(ctx context.Context, ref approval.Ref, reason string, t time.Time) error {
	return unavailable("wake at", r.rdb.ZAdd(ctx, timersKey(r.shards.of(ref.Principal)), redis.Z{
		Score: float64(t.UnixMilli()), Member: ref.Key + "|" + ref.Principal + "|" + reason,
	}).Err())
}

// FireDue moves every shard's due wake-ups onto its stream.
func (r *Redis) FireDue(ctx context.Context, now time.Time) (int, error) {
	const batch = 200
	total := 0
	for _, tag := range r.shards.tags {
		for {
			n, err := fireScript.Run(ctx, r.rdb, []string{timersKey(tag), streamKey(tag)}, now.UnixMilli(), batch).Int()
			if err != nil {
				return total, unavailable("fire timers", err)
			}
			total += n
			if n < batch {
				break
			}
		}
	}
	return total, nil
}

// Consume runs workers over every shard's stream until ctx ends, then
// waits for the tasks in progress.
func (r *Redis) Consume(ctx context.Context, consumer string, workers int, handle func(context.Context, approval.Task) error) {
	h := &holding{ids: map[string]map[string]bool{}}
	tasks := make(chan approval.Task)
	var readers sync.WaitGroup
	for _, tags := range r.readGroups() {
		readers.Add(1)
		go func() { defer readers.Done(); r.read(ctx, tags, consumer, workers, tasks, h) }()
	}
	renewDone := make(chan struct{})
	var renewer sync.WaitGroup
	renewer.Add(1)
	go func() { defer renewer.Done(); r.renew(renewDone, consumer, h) }()

	var busy sync.WaitGroup
	for range workers {
		busy.Add(1)
		go func() {
			defer busy.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case t := <-tasks:
					r.work(ctx, t, handle, h)
				}
			}
		}()
	}
	readers.Wait()
	busy.Wait()
	close(renewDone) // the tasks in progress are finished: stop renewing
	renewer.Wait()
}

func (r *Redis) work(ctx context.Context, t approval.Task, handle func(context.Context, approval.Task) error, h *holding) {
	tag := r.shards.of(t.Ref.Principal)
	if err := handle(ctx, t); err != nil {
		// Stop renewing it: it is retried after ClaimIdle, by any replica.
		h.drop(tag, t.ID)
		return
	}
	bg := context.WithoutCancel(ctx)
	pipe := r.rdb.Pipeline()
	pipe.XAck(bg, streamKey(tag), groupName, t.ID)
	pipe.XDel(bg, streamKey(tag), t.ID)
	if _, err := pipe.Exec(bg); err != nil {
		r.log.Warn("queue ack failed; the task will be seen again", "operation", t.Ref.Key, "err", err)
	}
	h.drop(tag, t.ID)
}

// readGroups groups the shards for blocking reads: one read names every
// shard's stream on a single server, so the workers hold one connection,
// not one per shard; a cluster needs a read per shard (each stream is in
// its own slot), spread over its masters' connection pools.
func (r *Redis) readGroups() [][]string {
	if _, ok := r.rdb.(*redis.ClusterClient); !ok {
		return [][]string{r.shards.tags}
	}
	out := make([][]string, len(r.shards.tags))
	for i, t := range r.shards.tags {
		out[i] = []string{t}
	}
	return out
}

// read feeds the tasks of some shards: first those abandoned by a
// consumer that stopped renewing them, then new ones.
func (r *Redis) read(ctx context.Context, tags []string, consumer string, count int, tasks chan<- approval.Task, h *holding) {
	streams := make([]string, 0, 2*len(tags))
	for _, t := range tags {
		streams = append(streams, streamKey(t))
	}
	for range tags {
		streams = append(streams, ">")
	}
	nextClaim := time.Time{}
	for ctx.Err() == nil {
		if err := r.ensureGroups(ctx, tags); err != nil {
			r.pause(ctx, "create consumer group", err)
			continue
		}
		var msgs []tagged
		if time.Now().After(nextClaim) {
			nextClaim = time.Now().Add(r.ClaimIdle / 3)
			claimed, err := r.claimAbandoned(ctx, tags, consumer, count)
			if err != nil {
				r.pause(ctx, "claim abandoned tasks", err)
				continue
			}
			msgs = claimed
		}
		if len(msgs) == 0 {
			res, err := r.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
				Group: groupName, Consumer: consumer, Streams: streams, Count: int64(count), Block: r.Block,
			}).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				r.lostGroups(tags, err)
				r.pause(ctx, "read tasks", err)
				continue
			}
			for _, st := range res {
				for _, m := range st.Messages {
					msgs = append(msgs, tagged{tag: tagOfStream(st.Stream), msg: m})
				}
			}
		}
		for _, m := range msgs {
			op, _ := m.msg.Values["o"].(string)
			p, _ := m.msg.Values["p"].(string)
			h.add(m.tag, m.msg.ID)
			select {
			case tasks <- approval.Task{ID: m.msg.ID, Ref: approval.Ref{Principal: p, Key: op}}:
			case <-ctx.Done():
				h.drop(m.tag, m.msg.ID) // left for another consumer
			}
		}
	}
}

type tagged struct {
	tag string
	msg redis.XMessage
}

func tagOfStream(stream string) string {
	return strings.TrimSuffix(strings.TrimPrefix(stream, prefix), ":q")
}

// claimAbandoned takes over the tasks no consumer renewed for ClaimIdle.
func (r *Redis) claimAbandoned(ctx context.Context, tags []string, consumer string, count int) ([]tagged, error) {
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.XAutoClaimCmd, len(tags))
	for i, t := range tags {
		cmds[i] = pipe.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: streamKey(t), Group: groupName, Consumer: consumer, MinIdle: r.ClaimIdle, Start: "0-0", Count: int64(count),
		})
	}
	_, err := pipe.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		r.lostGroups(tags, err)
		return nil, err
	}
	var out []tagged
	for i, c := range cmds {
		msgs, _, _ := c.Result()
		for _, m := range msgs {
			out = append(out, tagged{tag: tags[i], msg: m})
		}
	}
	return out, nil
}

// pause waits a little after a failed queue call (the store may be down).
func (r *Redis) pause(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		r.log.Warn("queue: "+what+" failed", "err", err)
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// renew resets the idle time of every task this consumer holds, so that no
// other consumer takes over work in progress, until done is closed.
func (r *Redis) renew(done <-chan struct{}, consumer string, h *holding) {
	every := min(r.Renew, r.ClaimIdle/3)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		for tag, ids := range h.snapshot() {
			err := r.rdb.XClaimJustID(ctx, &redis.XClaimArgs{
				Stream: streamKey(tag), Group: groupName, Consumer: consumer, MinIdle: 0, Messages: ids,
			}).Err()
			if err != nil && !errors.Is(err, redis.Nil) {
				r.log.Warn("queue: renewing held tasks failed", "err", err)
			}
		}
		cancel()
	}
}

func (r *Redis) ensureGroups(ctx context.Context, tags []string) error {
	r.groupMu.Lock()
	defer r.groupMu.Unlock()
	for _, tag := range tags {
		if r.groupOK[tag] {
			continue
		}
		err := r.rdb.XGroupCreateMkStream(ctx, streamKey(tag), groupName, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return unavailable("create consumer group", err)
		}
		r.groupOK[tag] = true
	}
	return nil
}

// lostGroups forgets the shards' groups after NOGROUP (a stream was
// deleted, e.g. by a flush) so the next read creates them again.
func (r *Redis) lostGroups(tags []string, err error) {
	if strings.Contains(err.Error(), "NOGROUP") {
		r.groupMu.Lock()
		for _, t := range tags {
			delete(r.groupOK, t)
		}
		r.groupMu.Unlock()
	}
}

// holding is the set of task ids this consumer holds, per shard.
type holding struct {
	mu  sync.Mutex
	ids map[string]map[string]bool
}

func (h *holding) add(tag, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ids[tag] == nil {
		h.ids[tag] = map[string]bool{}
	}
	h.ids[tag][id] = true
}

func (h *holding) drop(tag, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.ids[tag], id)
}

func (h *holding) snapshot() map[string][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]string{}
	for tag, ids := range h.ids {
		for id := range ids {
			out[tag] = append(out[tag], id)
		}
	}
	return out
}
