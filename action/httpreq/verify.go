package httpreq

import (
	"context"
	"fmt"
	"strings"

	"github.com/countersign/countersign/approval"
)

// stale is the stale_state error of an operation whose resource moved:
// what changed, and the current values (error.details).
func stale(prev *snapshot, rd *read, prevETag string) *approval.ExecError {
	if rd.gone {
		return &approval.ExecError{Code: approval.CodeStaleState,
			Message: "the resource no longer exists on the target; nothing was written. Prepare again if it is still needed.",
			Details: map[string]any{"reason": "gone", "current": nil}}
	}
	now := take(rd.doc, prev.Fields)
	changed := prev.changes(now)
	d := map[string]any{"reason": "changed", "current": now.Values, "changed": changed, "state_hash": now.hash()}
	msg := fmt.Sprintf("the resource changed since it was prepared (%s); nothing was written. Prepare again so the human sees the current state.", fieldList(changed))
	if len(changed) == 0 {
		d["reason"] = "etag_changed"
		d["etag"] = rd.etag
		msg = "the resource was modified since it was prepared (its ETag changed from " + prevETag + " to " + rd.etag +
			"), so the target would refuse the write; nothing was written. Prepare again."
	}
	return &approval.ExecError{Code: approval.CodeStaleState, Message: msg, Details: d}
}

func fieldList(cs []approval.Change) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Field)
	}
	if len(names) > 5 {
		names = append(names[:5], fmt.Sprintf("and %d more", len(names)-5))
	}
	return strings.Join(names, ", ")
}

// verify re-reads the resource of a state-bound operation and compares it
// with the binding. It returns a *ExecError with stale_state when the
// state moved (or the resource is gone, or its strong ETag changed), and a
// *readError when the target could not be read.
func (a *Action) verify(ctx context.Context, t *target, r *Request, st *approval.StateBinding) (*snapshot, error) {
	prev, err := decodeSnapshot(st.Snapshot)
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "the stored state binding is unreadable; nothing was written"}
	}
	rd, rerr := a.readState(ctx, t, r)
	if rerr != nil {
		return nil, rerr
	}
	if rd.gone {
		return nil, stale(prev, rd, st.ETag)
	}
	now := take(rd.doc, prev.Fields)
	if now.hash() != st.Hash || (st.ETag != "" && rd.etag != st.ETag) {
		return nil, stale(prev, rd, st.ETag)
	}
	return prev, nil
}

// Recheck implements approval.Rechecker: the approval page calls it when
// it renders. It returns a *ExecError with stale_state when the resource
// moved since prepare, nil when it did not (or the operation is not bound
// to state), and another error when the target cannot be read now.
func (a *Action) Recheck(ctx context.Context, op *approval.Operation) error {
	if op.State == nil {
		return nil
	}
	r, t, err := a.stored(op)
	if err != nil {
		return err
	}
	if r.bulk() {
		_, _, err = a.verifyItems(ctx, t, r, op.State, "they were prepared")
		return err
	}
	_, err = a.verify(ctx, t, r, op.State)
	return err
}
