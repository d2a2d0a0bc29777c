package store

import (
	"context"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

// hub fans the changes channel out to local waiters: one subscription per
// process, however many long-polls are waiting.
type hub struct {
	rdb redis.UniversalClient
	log *slog.Logger

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	ps      *redis.PubSub
	ready   chan struct{}
	done    chan struct{}
}

func newHub(rdb redis.UniversalClient, log *slog.Logger) *hub {
	return &hub{rdb: rdb, log: log, waiters: map[string]map[chan struct{}]struct{}{}, done: make(chan struct{})}
}

// Changes returns a channel signalled after every change of the operation.
func (r *Redis) Changes(key string) (<-chan struct{}, func()) {
	return r.hub.watch(key)
}

func (h *hub) watch(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.start()
	ready := h.ready
	if h.waiters[key] == nil {
		h.waiters[key] = map[chan struct{}]struct{}{}
	}
	h.waiters[key][ch] = struct{}{}
	h.mu.Unlock()
	<-ready // subscribed: no change after this point is missed
	return ch, func() {
		h.mu.Lock()
		delete(h.waiters[key], ch)
		if len(h.waiters[key]) == 0 {
			delete(h.waiters, key)
		}
		h.mu.Unlock()
	}
}

// start subscribes once; called with mu held.
func (h *hub) start() {
	if h.ps != nil {
		return
	}
	h.ready = make(chan struct{})
	h.ps = h.rdb.Subscribe(context.Background(), changesChannel)
	go func(ps *redis.PubSub, ready chan struct{}) {
		// Receive the subscription confirmation before declaring readiness.
		if _, err := ps.Receive(context.Background()); err != nil {
			h.log.Warn("subscribe to changes", "err", err)
		}
		close(ready)
		for msg := range ps.Channel() {
			h.mu.Lock()
			for ch := range h.waiters[msg.Payload] {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
			h.mu.Unlock()
		}
	}(h.ps, h.ready)
}

func (h *hub) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ps == nil {
		return nil
	}
	err := h.ps.Close()
	h.ps = nil
	return err
}
