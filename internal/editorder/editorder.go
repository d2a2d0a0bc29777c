// Package editorder keeps the in-place edits of a delivered message (a
// Slack message, a Teams card) in order. Two workers may edit one message
// at once, one holding an older read of the operation (approved) than the
// other (succeeded), and the older edit's request may land last, leaving
// the message showing a state the operation has left. Edits of one message
// are serialized here and never go back to an earlier state. This is one
// process's guard; across replicas, the store's sync mark (which never
// goes back either) covers all but a request that lands late.
package editorder

import (
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
)

// Edits orders the edits of every message one notifier sends.
type Edits struct {
	now func() time.Time

	mu   sync.Mutex
	msgs map[string]*shown
}

// shown is what one message was last edited to, and the lock its edits take.
type shown struct {
	mu   sync.Mutex
	rank int
	at   time.Time
}

// New builds Edits with a clock (nil: time.Now).
func New(now func() time.Time) *Edits {
	if now == nil {
		now = time.Now
	}
	return &Edits{now: now, msgs: map[string]*shown{}}
}

// Apply runs edit, which makes message key show m, unless the message
// already shows a later state; edits of one message run one at a time.
// A failed edit leaves the message as it was shown before.
func (e *Edits) Apply(key string, m approval.Message, edit func() error) error {
	s := e.get(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Rank(m)
	if r < s.rank {
		return nil
	}
	if err := edit(); err != nil {
		return err
	}
	s.rank, s.at = r, e.now()
	return nil
}

// keep bounds how many messages are remembered before old ones (not
// edited for a day: no edit of a message comes that late) are forgotten.
const keep = 10000

func (e *Edits) get(key string) *shown {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.msgs[key]
	if ok {
		return s
	}
	if len(e.msgs) >= keep {
		for k, v := range e.msgs {
			if v.mu.TryLock() {
				if e.now().Sub(v.at) > 24*time.Hour {
					delete(e.msgs, k)
				}
				v.mu.Unlock()
			}
		}
	}
	s = &shown{rank: -1, at: e.now()}
	e.msgs[key] = s
	return s
}

// Rank orders the states a message shows: pending, then approved (or
// running), then ended; and more decisions after fewer.
func Rank(m approval.Message) int {
	r := 2
	switch m.Status {
	case approval.StatusPending:
		r = 0
	case approval.StatusApproved, approval.StatusExecuting:
		r = 1
	}
	return r*1000 + len(m.Approvals)
}
