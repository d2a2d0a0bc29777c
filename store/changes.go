package store

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// hub fans the changes channel out to local waiters: one subscription per
// process (per master in a cluster), however many long-polls are waiting.
//
// In a cluster every master is subscribed directly, because a PUBLISH
// reaches other masters over the cluster bus, where a second message
// close behind the first waited about 40 ms (measured on Redis 7.0: the
// "executing" then "succeeded" of one operation). A message then arrives
// twice, locally and over the bus; wake-ups coalesce, so that is harmless.
type hub struct {
	rdb redis.UniversalClient
	log *slog.Logger

	mu      sync.Mutex // guards waiters and ready
	waiters map[string]map[chan struct{}]struct{}
	ready   chan struct{}

	// subsMu guards subs and closed; taken inside mu, or alone by close,
	// which must not wait for mu (a reader holds it to signal).
	subsMu sync.Mutex
	subs   []*redis.PubSub
	closed bool

	// The hub owns the goroutines that read the subscriptions: ctx ends
	// and close waits for them (wg).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newHub(rdb redis.UniversalClient, log *slog.Logger) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	return &hub{rdb: rdb, log: log, waiters: map[string]map[chan struct{}]struct{}{}, ctx: ctx, cancel: cancel}
}

// Changes returns a channel signalled after every change of the operation.
// It returns once the subscription is confirmed (no later change is
// missed), or unavailable when ctx ends first.
func (r *Redis) Changes(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	return r.hub.watch(ctx, key)
}

func (h *hub) watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.subsMu.Lock()
	closed := h.closed
	if !closed {
		h.start()
	}
	h.subsMu.Unlock()
	if closed {
		h.mu.Unlock()
		return nil, nil, unavailable("subscribe to changes", redis.ErrClosed)
	}
	ready := h.ready
	if h.waiters[key] == nil {
		h.waiters[key] = map[chan struct{}]struct{}{}
	}
	h.waiters[key][ch] = struct{}{}
	h.mu.Unlock()
	cancel := func() {
		h.mu.Lock()
		delete(h.waiters[key], ch)
		if len(h.waiters[key]) == 0 {
			delete(h.waiters, key)
		}
		h.mu.Unlock()
	}
	select {
	case <-ready: // subscribed: no change after this point is missed
		return ch, cancel, nil
	case <-ctx.Done():
		cancel()
		return nil, nil, unavailable("subscribe to changes", ctx.Err())
	}
}

// start subscribes once; called with mu and subsMu held, unless closed.
func (h *hub) start() {
	if h.subs != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cc, ok := h.rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			ps := c.Subscribe(h.ctx, changesChannel)
			mu.Lock()
			h.subs = append(h.subs, ps)
			mu.Unlock()
			return nil
		})
		if err != nil {
			h.log.Warn("subscribe to changes on every master; falling back to one subscription", "err", err)
		}
	}
	if len(h.subs) == 0 {
		h.subs = []*redis.PubSub{h.rdb.Subscribe(h.ctx, changesChannel)}
	}
	h.ready = make(chan struct{})
	var confirmed sync.WaitGroup
	for _, ps := range h.subs {
		confirmed.Add(1)
		h.wg.Go(func() {
			// Receive the subscription confirmation before declaring readiness.
			if _, err := ps.Receive(h.ctx); err != nil {
				h.log.Warn("subscribe to changes", "err", err)
			}
			confirmed.Done()
			// The channel closes when close closes the subscription.
			for msg := range ps.Channel() {
				h.signal(msg.Payload)
			}
		})
	}
	ready := h.ready
	h.wg.Go(func() { confirmed.Wait(); close(ready) })
}

func (h *hub) signal(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.waiters[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// close ends the subscriptions and returns once their goroutines have.
// Later watches are refused (unavailable).
func (h *hub) close() error {
	h.subsMu.Lock()
	subs := h.subs
	h.subs, h.closed = nil, true
	h.subsMu.Unlock()
	h.cancel()
	var first error
	for _, ps := range subs {
		if err := ps.Close(); err != nil && first == nil {
			first = err
		}
	}
	// Not under mu: the readers take it to signal.
	h.wg.Wait()
	return first
}
