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

	var body map[string]any
	switch r.Method {
	case http.MethodPatch:
		sent, err := decodeJSON(r.Body)
		obj, ok := sent.(map[string]any)
		if err != nil || !ok {
			return "", nil, approval.Errorf(approval.CodeInvalidState, "the original body is unreadable")
		}
		body = map[string]any{}
		for _, l := range leaves(obj, nil) {
			if v, ok := pre.Values[l.path.String()]; ok {
				set(body, l.path, v)
			} else {
				set(body, l.path, nil)
			}
		}
	case http.MethodPut:
		var ok bool
		if body, ok = rd.doc.(map[string]any); !ok {
			return "", nil, errors.New("httpreq: resource is not an object")
		}
		for _, f := range pre.Fields {
			if v, ok := pre.Values[f]; ok {
				set(body, parseField(f), v)
			} else {
				remove(body, parseField(f))
			}
		}
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
