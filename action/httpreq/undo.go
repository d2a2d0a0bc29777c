package httpreq

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/countersign/countersign/approval"
)

// UndoInput implements approval.Undoer: the compensating request of a
// succeeded PATCH or PUT writes back the previous values of only the
// fields it touched, on the same path and query.
//
//   - PATCH: a PATCH whose body sets each field the original set back to
//     its value before (null where the field was absent: merge-patch
//     removes it).
//   - PUT: a PUT of the resource as it is now, with every field the
//     original bound restored (or removed where it was absent), since a
//     PUT must carry the whole resource.
//
// The undo is bound to the post-execution state: the resource is read now
// and compared with the state recorded right after the write; if it
// changed since, the undo is refused with stale_state (details.current and
// details.changed). The returned input then goes through Prepare, which
// binds the undo operation to the state as read at that moment and shows
// its own diff.
//
// Returns invalid_state for POST and DELETE (irreversible), and for
// writes whose state was not bound or whose post-write state is unknown;
// stale_state when the resource changed since the execution; unavailable
// when the target cannot be read.
func (a *Action) UndoInput(ctx context.Context, op *approval.Operation) (string, json.RawMessage, error) {
	r, err := decodeStored(op.Input)
	if err != nil {
		return "", nil, approval.Errorf(approval.CodeInvalidState, "the operation's input is unreadable")
	}
	if r.bulk() {
		return a.undoBulk(ctx, op, r)
	}
	switch r.Method {
	case http.MethodPatch, http.MethodPut:
	default:
		return "", nil, approval.Errorf(approval.CodeInvalidState,
			"a %s cannot be undone: there is no previous state to write back", r.Method).
			WithDetails(map[string]any{"reason": "irreversible", "method": r.Method})
	}
	if op.State == nil {
		return "", nil, approval.Errorf(approval.CodeInvalidState,
			"this write was not bound to the resource's state, so its previous values are unknown").
			WithDetails(map[string]any{"reason": "not_state_bound"})
	}
	var res Result
	if err := json.Unmarshal(op.Result, &res); err != nil || len(res.PostState) == 0 || res.PostStateHash == "" {
		return "", nil, approval.Errorf(approval.CodeInvalidState,
			"the state right after this write could not be read, so an undo cannot be checked against it").
			WithDetails(map[string]any{"reason": "post_state_unknown"})
	}
	pre, err1 := decodeSnapshot(op.State.Snapshot)
	post, err2 := decodeSnapshot(res.PostState)
	if err1 != nil || err2 != nil {
		return "", nil, approval.Errorf(approval.CodeInvalidState, "the recorded state is unreadable")
	}
	t, ok := a.targets[r.Target]
	if !ok {
		return "", nil, approval.Errorf(approval.CodeInvalidState, "target %s is no longer configured", r.Target)
	}

	rd, rerr := a.readState(ctx, t, r)
	if rerr != nil {
		return "", nil, rerr.prepareError()
	}
	if rd.gone {
		return "", nil, approval.Errorf(approval.CodeStaleState,
			"the resource no longer exists on the target, so there is nothing to undo").
			WithDetails(map[string]any{"reason": "gone", "current": nil})
	}
	now := take(rd.doc, post.Fields)
	if now.hash() != res.PostStateHash {
		changed := post.changes(now)
		return "", nil, approval.Errorf(approval.CodeStaleState,
			"the resource changed since the operation ran (%s); writing the old values back would overwrite that change, so the undo is refused",
			fieldList(changed)).
			WithDetails(map[string]any{"reason": "changed", "current": now.Values, "changed": changed, "state_hash": now.hash()})
	}

	body, err := compensation(r, pre.Fields, pre.Values, nil, rd.doc)
	if err != nil {
		return "", nil, err
	}
	in, err := json.Marshal(struct {
		Target string              `json:"target"`
		Method string              `json:"method"`
		Path   string              `json:"path"`
		Query  map[string][]string `json:"query,omitempty"`
		Body   any                 `json:"body"`
	}{r.Target, r.Method, r.Path, r.Query, body})
	if err != nil {
		return "", nil, err
	}
	return Name, in, nil
}

// compensation is the body that writes back the previous values of what
// r wrote: for a PATCH, each field its body set, at its value before
// (null where it was absent: merge-patch removes it); for a PUT, the
// resource as it is now (cur) with every bound field restored or removed.
// pre holds the previous values of fields (absent fields have none);
// a field in lost had a value that was not kept, and cannot be restored.
func compensation(r *Request, fields []string, pre map[string]json.RawMessage, lost map[string]string, cur any) (map[string]any, error) {
	restore := func(body map[string]any, f string, p fieldPath) error {
		if v, ok := pre[f]; ok {
			set(body, p, v)
			return nil
		}
		if _, gone := lost[f]; gone {
			return approval.Errorf(approval.CodeInvalidState,
				"the previous value of %s was too long to keep, so it cannot be written back", f).
				WithDetails(map[string]any{"reason": "previous_value_not_kept", "field": f})
		}
		if r.Method == http.MethodPatch {
			set(body, p, nil)
		} else {
			remove(body, p)
		}
		return nil
	}
	switch r.Method {
	case http.MethodPatch:
		sent, err := decodeJSON(r.Body)
		obj, ok := sent.(map[string]any)
		if err != nil || !ok {
			return nil, approval.Errorf(approval.CodeInvalidState, "the original body is unreadable")
		}
		body := map[string]any{}
		for _, l := range leaves(obj, nil) {
			if err := restore(body, l.path.String(), l.path); err != nil {
				return nil, err
			}
		}
		return body, nil
	case http.MethodPut:
		body, ok := cur.(map[string]any)
		if !ok {
			return nil, errors.New("httpreq: resource is not an object")
		}
		for _, f := range fields {
			if err := restore(body, f, parseField(f)); err != nil {
				return nil, err
			}
		}
		return body, nil
	}
	return nil, approval.Errorf(approval.CodeInvalidState, "a %s cannot be undone", r.Method)
}
