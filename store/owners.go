package store

import "sync"

// owners remembers which principal an operation key belongs to, so that a
// reference by key alone (a link, a Slack button, an operator) is found
// without asking every shard (locate). The owner of a key never changes,
// so an entry can only be stale by its operation being gone, which the
// read that follows finds out. It keeps at most two generations of
// ownersGen keys: the older is dropped when the newer fills.
type owners struct {
	mu        sync.Mutex
	cur, prev map[string]string
}

const ownersGen = 50000

func (o *owners) get(key string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p, ok := o.cur[key]; ok {
		return p
	}
	if p, ok := o.prev[key]; ok {
		o.putLocked(key, p)
		return p
	}
	return ""
}

func (o *owners) put(key, principal string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.putLocked(key, principal)
}

func (o *owners) putLocked(key, principal string) {
	if o.cur == nil || len(o.cur) >= ownersGen {
		o.prev, o.cur = o.cur, make(map[string]string, 1024)
	}
	o.cur[key] = principal
}
