package receipt

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"
)

// ReplayCache remembers the receipts a target has accepted, so that each
// is accepted once. Implementations shared by several replicas of a target
// (a Redis SET NX with an expiry at exp) make that hold across them.
type ReplayCache interface {
	// Use records id as used until exp and reports whether it was unused.
	// It must be atomic: of two concurrent calls with one id, one wins.
	Use(ctx context.Context, id string, exp time.Time) (bool, error)
}

// ErrReplayCacheFull is returned by MemoryReplayCache when it holds its
// maximum of unexpired ids: it refuses new receipts rather than forget one
// that could then be replayed.
var ErrReplayCacheFull = errors.New("receipt: replay cache is full")

// MemoryReplayCache is an in-process ReplayCache holding at most Max ids,
// each until its receipt expires. Receipts live five minutes, so Max is
// the most receipts a target accepts in five minutes (default 100,000:
// about 10 MiB).
type MemoryReplayCache struct {
	max int
	now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time
	exp  expiryHeap
}

// NewMemoryReplayCache returns a cache of at most max ids (max ≤ 0: the
// default 100,000). now may be nil (time.Now).
func NewMemoryReplayCache(max int, now func() time.Time) *MemoryReplayCache {
	if max <= 0 {
		max = 100_000
	}
	if now == nil {
		now = time.Now
	}
	return &MemoryReplayCache{max: max, now: now, seen: map[string]time.Time{}}
}

var _ ReplayCache = (*MemoryReplayCache)(nil)

// Use implements ReplayCache. Expired ids are dropped as time passes, at
// a cost of O(log n) each.
func (m *MemoryReplayCache) Use(_ context.Context, id string, exp time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	// An id is held through the instant exp itself: the verifier still
	// accepts its receipt then (it refuses only after exp plus leeway).
	for len(m.exp) > 0 && m.exp[0].at.Before(now) {
		e := heap.Pop(&m.exp).(expiry)
		if m.seen[e.id].Equal(e.at) {
			delete(m.seen, e.id)
		}
	}
	if _, used := m.seen[id]; used {
		return false, nil
	}
	if len(m.seen) >= m.max {
		return false, ErrReplayCacheFull
	}
	m.seen[id] = exp
	heap.Push(&m.exp, expiry{id: id, at: exp})
	return true, nil
}

// Len is the number of ids held.
func (m *MemoryReplayCache) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen)
}

type expiry struct {
	id string
	at time.Time
}

type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
