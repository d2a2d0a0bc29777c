package httpreq

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/countersign/countersign/approval"
)

// undoBulk drafts the compensation of a bulk operation: a bulk of the
// inverse writes of the items it wrote (result.items[] outcome written),
// in the same order; items that were not written are left alone, and so
// are written DELETEs and POSTs, which cannot be undone. Each written
// item is read now and compared with the state recorded right after its
// write; if any changed since, the whole undo is refused with stale_state
// naming the items (writing old values back would overwrite those
// changes). The input returned goes through Prepare like any bulk, which
// binds each inverse write to the state read at that moment.
//
// Returns invalid_state when nothing written can be undone (or a previous
// value was too long to keep, or a post-write state is unknown),
// stale_state, or the codes of a state read.
func (a *Action) undoBulk(ctx context.Context, op *approval.Operation, r *Request) (string, json.RawMessage, error) {
	var res BulkResult
	if err := json.Unmarshal(op.Result, &res); err != nil || len(res.Items) != len(r.Items) {
		return "", nil, approval.Errorf(approval.CodeInvalidState, "the operation recorded no per-item outcome, so there is nothing to undo").
			WithDetails(map[string]any{"reason": "nothing_written"})
	}
	binds, err := decodeBulkState(op.State)
	if err != nil {
		return "", nil, approval.Errorf(approval.CodeInvalidState, "the recorded state is unreadable")
	}
	t, ok := a.targets[r.Target]
	if !ok {
		return "", nil, approval.Errorf(approval.CodeInvalidState, "target %s is no longer configured", r.Target)
	}
	var undo, irreversible, unknown []int
	written := 0
	for i, ir := range res.Items {
		if ir.Outcome != OutcomeWritten {
			continue
		}
		written++
		switch it := r.Items[i]; {
		case it.Method != http.MethodPatch && it.Method != http.MethodPut:
			irreversible = append(irreversible, i+1)
		case binds[i+1] == nil || ir.PostStateHash == "":
			unknown = append(unknown, i+1)
		default:
			undo = append(undo, i)
		}
	}
	switch {
	case written == 0:
		return "", nil, approval.Errorf(approval.CodeInvalidState, "no item of this bulk was written, so there is nothing to undo").
			WithDetails(map[string]any{"reason": "nothing_written"})
	case len(unknown) > 0:
		return "", nil, approval.Errorf(approval.CodeInvalidState,
			"the state right after the write of %s could not be read (or was not bound), so an undo cannot be checked against it",
			strings.ToLower(itemList(unknown))).WithDetails(map[string]any{"reason": "post_state_unknown", "items": unknown})
	case len(undo) == 0:
		return "", nil, approval.Errorf(approval.CodeInvalidState,
			"the written items are DELETEs or POSTs, which cannot be undone: there is no previous state to write back").
			WithDetails(map[string]any{"reason": "irreversible", "items": irreversible})
	}

	reads, errs := a.readItems(ctx, t, r.Items, undo, true)
	if at, rerr := firstError(errs); rerr != nil {
		return "", nil, atItem(rerr.prepareError(), at)
	}
	var entries []map[string]any
	for _, i := range undo {
		if e := changedSinceWrite(binds[i+1], r.Items[i], reads[i], res.Items[i].PostStateHash); e != nil {
			entries = append(entries, e)
		}
	}
	if len(entries) > 0 {
		ee := staleItems(entries, written, "the operation ran")
		return "", nil, (&approval.Error{Code: approval.CodeStaleState, Details: ee.Details,
			Message: strings.Replace(ee.Message, "nothing was written. Prepare again so the human sees the current state.",
				"writing the old values back would overwrite those changes, so the undo is refused.", 1)})
	}

	type item struct {
		Method string              `json:"method"`
		Path   string              `json:"path"`
		Query  map[string][]string `json:"query,omitempty"`
		Body   any                 `json:"body"`
	}
	var items []item
	for _, i := range undo {
		it, b := r.Items[i], binds[i+1]
		body, err := compensation(it, b.Fields, b.Values, b.Digests, reads[i].doc)
		if err != nil {
			return "", nil, atItem(err, i)
		}
		items = append(items, item{it.Method, it.Path, it.Query, body})
	}
	in, err := json.Marshal(struct {
		Target string `json:"target"`
		Items  []item `json:"items"`
	}{r.Target, items})
	if err != nil {
		return "", nil, err
	}
	return Name, in, nil
}

// changedSinceWrite compares an item's resource now with the state
// recorded right after its write. It returns nil when nothing changed,
// else its entry of a stale_state report: the fields whose value is no
// longer what the write set (other bound fields are known to have
// changed only through the state hash).
func changedSinceWrite(b *itemBinding, r *Request, rd *read, postHash string) map[string]any {
	entry := map[string]any{"item": b.N, "method": r.Method, "path": r.Path}
	if rd.gone {
		entry["reason"] = "gone"
		return entry
	}
	if take(rd.doc, b.Fields).hash() == postHash {
		return nil
	}
	changed := []approval.Change{}
	body, _ := decodeJSON(r.Body)
	obj, _ := body.(map[string]any)
	for _, l := range leaves(obj, nil) {
		sent := canonical(l.value)
		c := approval.Change{Item: b.N, Field: l.path.String(), Before: sent}
		if v, ok := lookup(rd.doc, l.path); ok {
			c.After = shownValue(canonical(v))
		}
		if bytes.Equal(c.After, sent) || (c.After == nil && string(sent) == "null") || len(changed) == maxStaleFields {
			continue
		}
		changed = append(changed, c)
	}
	entry["reason"], entry["changed"] = "changed", changed
	if len(changed) == 0 {
		entry["note"] = fmt.Sprintf("a bound field other than those the write set changed (bound: %s)", strings.Join(first(b.Fields, 5), ", "))
	}
	return entry
}

func first(l []string, n int) []string {
	if len(l) > n {
		return l[:n]
	}
	return l
}
