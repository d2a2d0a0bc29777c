package httpreq

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/countersign/countersign/approval"
)

// bulkReaders bounds the state reads of bulk operations in flight against
// one target from this process, whatever the number of bulks being
// prepared, re-checked or executed at once: a bulk of 100 items costs the
// target at most this many concurrent GETs.
const bulkReaders = 8

// The state binding of a bulk operation is one StateBinding whose Snapshot
// is a bulkState: one itemBinding per state-bound item, and whose Hash is
// the SHA-256 of the items' numbers and state hashes. Each item's own hash
// is computed exactly as a single request's (over the full values of its
// bound fields), so a re-read compares every value; but only part of the
// values is kept (keepValues): what an undo needs and what fits, the rest
// as a short digest that still tells which field changed. The binding
// then stays within the bound on what an operation may store however
// large the resources are.

type bulkState struct {
	Items []itemBinding `json:"items"`
}

type itemBinding struct {
	N      int                        `json:"n"`
	Fields []string                   `json:"fields"`
	Values map[string]json.RawMessage `json:"values,omitempty"`
	// Digests are of the values not kept: the first 16 hex digits of the
	// SHA-256 of their canonical JSON.
	Digests map[string]string `json:"digests,omitempty"`
	Hash    string            `json:"hash"`
	ETag    string            `json:"etag,omitempty"`
}

func digest(v json.RawMessage) string {
	h := sha256.Sum256(v)
	return hex.EncodeToString(h[:8])
}

// maxKeptValue is the longest value a bulk binding keeps whole.
const maxKeptValue = 1 << 10

// keepValues fills the bindings' Values and Digests from the full
// snapshots, within budget bytes: first the fields each item's body sets
// (an undo writes them back), then the others, in item order.
func keepValues(bs []*itemBinding, snaps []*snapshot, bodyFields [][]string, budget int) {
	for i, b := range bs {
		b.Values, b.Digests = map[string]json.RawMessage{}, map[string]string{}
		for f, v := range snaps[i].Values {
			b.Digests[f] = digest(v)
		}
	}
	keep := func(i int, f string) {
		v, ok := snaps[i].Values[f]
		if _, done := bs[i].Values[f]; !ok || done || len(v) > maxKeptValue || len(v)+len(f) > budget {
			return
		}
		budget -= len(v) + len(f)
		bs[i].Values[f] = v
		delete(bs[i].Digests, f)
	}
	for i := range bs {
		for _, f := range bodyFields[i] {
			keep(i, f)
		}
	}
	for i := range bs {
		for _, f := range bs[i].Fields {
			keep(i, f)
		}
	}
	for _, b := range bs {
		if len(b.Values) == 0 {
			b.Values = nil
		}
		if len(b.Digests) == 0 {
			b.Digests = nil
		}
	}
}

// bulkStateHash is the state hash of a bulk operation.
func bulkStateHash(items []itemBinding) string {
	type entry struct {
		N    int    `json:"n"`
		Hash string `json:"hash"`
	}
	es := make([]entry, len(items))
	for i, it := range items {
		es[i] = entry{it.N, it.Hash}
	}
	h, err := approval.StateHash(es)
	if err != nil {
		panic(fmt.Sprintf("httpreq: bulk state hash: %v", err))
	}
	return h
}

func decodeBulkState(st *approval.StateBinding) (map[int]*itemBinding, error) {
	out := map[int]*itemBinding{}
	if st == nil {
		return out, nil
	}
	var bs bulkState
	if err := json.Unmarshal(st.Snapshot, &bs); err != nil {
		return nil, err
	}
	if bulkStateHash(bs.Items) != st.Hash {
		return nil, errors.New("bulk state binding does not match its hash")
	}
	for i := range bs.Items {
		out[bs.Items[i].N] = &bs.Items[i]
	}
	return out, nil
}

// readItems reads the state of items[i] for every i in which, at most
// bulkReaders at a time per target, all within the target's timeout
// together. With stop, the first read that fails cancels the others, and
// errs holds that one error only; otherwise errs holds each item's.
func (a *Action) readItems(ctx context.Context, t *target, items []*Request, which []int, stop bool) ([]*read, []*readError) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	reads, errs := make([]*read, len(items)), make([]*readError, len(items))
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		stopped bool
	)
	fail := func(i int, e *readError) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return // canceled by the failure that stopped the reads
		}
		errs[i] = e
		if stop {
			stopped = true
			cancel()
		}
	}
	for _, i := range which {
		mu.Lock()
		halt := stopped
		mu.Unlock()
		if halt {
			break
		}
		select {
		case t.readers <- struct{}{}:
		case <-ctx.Done():
			fail(i, &readError{rule: "state_read_failed", msg: fmt.Sprintf(
				"the target did not answer every state read of the bulk within its timeout (%s, shared by all of them)", t.timeout)})
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-t.readers; wg.Done() }()
			rd, rerr := a.readState(ctx, t, items[i])
			if rerr != nil {
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					rerr.msg += fmt.Sprintf(" (the state reads of a bulk share the target's timeout of %s)", t.timeout)
				}
				fail(i, rerr)
				return
			}
			mu.Lock()
			reads[i] = rd
			mu.Unlock()
		}()
	}
	wg.Wait()
	return reads, errs
}

// firstError is the error of a stopped readItems, and its item's index.
func firstError(errs []*readError) (int, *readError) {
	for i, e := range errs {
		if e != nil {
			return i, e
		}
	}
	return -1, nil
}

// boundItems lists the indexes of the items whose writes are bound to state.
func (t *target) boundItems(r *Request) []int {
	var out []int
	for i, it := range r.Items {
		if t.bound(it.Method) {
			out = append(out, i)
		}
	}
	return out
}

// notKept stands for a value the binding kept only as a digest, in a
// stale report's "before".
var notKept = json.RawMessage(`"(not kept: too long)"`)

// maxStaleFields bounds the changed fields reported of one stale item.
const maxStaleFields = 20

// maxShownValue bounds a current value in a bulk's stale report.
const maxShownValue = 1 << 10

func shownValue(v json.RawMessage) json.RawMessage {
	if len(v) <= maxShownValue {
		return v
	}
	s, _ := json.Marshal(fmt.Sprintf("(a value of %d bytes, not shown)", len(v)))
	return s
}

// itemStale compares an item's binding with a fresh read. It returns nil
// when the item is as bound, else its entry of a stale_state report.
func itemStale(b *itemBinding, r *Request, rd *read) map[string]any {
	entry := map[string]any{"item": b.N, "method": r.Method, "path": r.Path}
	if rd.gone {
		entry["reason"] = "gone"
		return entry
	}
	now := take(rd.doc, b.Fields)
	if now.hash() == b.Hash && (b.ETag == "" || rd.etag == b.ETag) {
		return nil
	}
	var changed []approval.Change
	for _, f := range b.Fields {
		cur, has := now.Values[f]
		c := approval.Change{Item: b.N, Field: f}
		if has {
			c.After = shownValue(cur)
		}
		switch v, kept := b.Values[f]; {
		case kept:
			if bytes.Equal(v, cur) {
				continue
			}
			c.Before = v
		case b.Digests[f] != "":
			if has && digest(cur) == b.Digests[f] {
				continue
			}
			c.Before = notKept
		default: // absent when bound
			if !has {
				continue
			}
		}
		if len(changed) == maxStaleFields {
			entry["more_changed"] = true
			break
		}
		changed = append(changed, c)
	}
	entry["reason"], entry["changed"] = "changed", changed
	if len(changed) == 0 {
		entry["reason"], entry["etag"] = "etag_changed", rd.etag
	}
	return entry
}

// staleItems is the stale_state error of a bulk whose items moved:
// details.items has one entry per stale item (item, method, path, reason,
// changed), details.stale_items their numbers, and details.changed every
// changed field with its item (for the page and Slack to show).
func staleItems(entries []map[string]any, total int, when string) *approval.ExecError {
	sort.Slice(entries, func(i, j int) bool { return entries[i]["item"].(int) < entries[j]["item"].(int) })
	var nums []int
	var words []string
	changed := []approval.Change{}
	for _, e := range entries {
		n := e["item"].(int)
		nums = append(nums, n)
		switch e["reason"] {
		case "gone":
			words = append(words, fmt.Sprintf("item %d is gone", n))
		case "etag_changed":
			words = append(words, fmt.Sprintf("item %d was modified (its ETag changed)", n))
		default:
			cs := e["changed"].([]approval.Change)
			if len(cs) == 0 {
				words = append(words, fmt.Sprintf("item %d changed", n))
				break
			}
			words = append(words, fmt.Sprintf("item %d: %s", n, fieldList(cs)))
			changed = append(changed, cs...)
		}
	}
	shown := words
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(words)-5))
	}
	return &approval.ExecError{Code: approval.CodeStaleState,
		Message: fmt.Sprintf("%d of the %d items changed since %s (%s); nothing was written. Prepare again so the human sees the current state.",
			len(entries), total, when, strings.Join(shown, "; ")),
		Details: map[string]any{"reason": "changed", "items": entries, "stale_items": nums, "changed": changed}}
}

// verifyItems re-reads every state-bound item and compares each with its
// binding. It returns the reads (for the post-write state), a *ExecError
// with stale_state naming every item that moved, or a *readError (with
// the item's index) when the target could not be read.
func (a *Action) verifyItems(ctx context.Context, t *target, r *Request, st *approval.StateBinding, when string) ([]*read, int, error) {
	binds, err := decodeBulkState(st)
	if err != nil {
		return nil, -1, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "the stored state binding is unreadable; nothing was written"}
	}
	which := t.boundItems(r)
	for _, i := range which {
		if binds[i+1] == nil {
			return nil, -1, &approval.ExecError{Code: approval.CodeExecutionFailed,
				Message: fmt.Sprintf("item %d has no stored state binding; nothing was written", i+1)}
		}
	}
	reads, errs := a.readItems(ctx, t, r.Items, which, true)
	if at, rerr := firstError(errs); rerr != nil {
		return nil, at, rerr
	}
	var entries []map[string]any
	for _, i := range which {
		if e := itemStale(binds[i+1], r.Items[i], reads[i]); e != nil {
			entries = append(entries, e)
		}
	}
	if len(entries) > 0 {
		return nil, -1, staleItems(entries, len(r.Items), when)
	}
	return reads, -1, nil
}
