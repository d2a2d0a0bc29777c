package httpreq

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/countersign/countersign/approval"
)

// Result is what a succeeded http.request records.
type Result struct {
	Status        int    `json:"status"`
	Body          string `json:"body,omitempty"`
	BodyTruncated bool   `json:"body_truncated,omitempty"`
	// PostStateHash is the state hash of the same fields read right after
	// the write; undo binds to it.
	PostStateHash string          `json:"post_state_hash,omitempty"`
	PostState     json.RawMessage `json:"post_state,omitempty"`
	// PostStateError says why the post-write state could not be read (the
	// write itself succeeded; undo is then not offered).
	PostStateError string `json:"post_state_error,omitempty"`
}

// Execute implements approval.Action. For a state-bound operation it
// re-reads the resource first and writes nothing if it moved
// (stale_state, current values in details). The write carries If-Match
// with the ETag seen at prepare (when the target gave a strong one),
// Idempotency-Key: <operation key>, and Countersign-Receipt: the receipt
// of this exact write, minted right before it is sent (when the execution
// has a countersigner); it is sent once, on a fresh connection, and never
// follows a redirect. A bulk operation is executed by executeBulk.
//
// Errors: stale_state; precondition_failed (412); execution_failed with
// outcome_unknown false when nothing was sent or the target answered with
// an error, and true when the request went out and no answer came back
// (or a gateway answered 502/504 or the target 303: it may have happened).
func (a *Action) Execute(ctx context.Context, op *approval.Operation) (json.RawMessage, error) {
	r, t, err := a.stored(op)
	if err != nil {
		return nil, err
	}
	if r.bulk() {
		return a.executeBulk(ctx, op, t, r)
	}
	var prev *snapshot
	if op.State != nil {
		prev, err = a.verify(ctx, t, r, op.State)
		var re *readError
		switch {
		case errors.As(err, &re):
			return nil, &approval.ExecError{Code: approval.CodeExecutionFailed,
				Message: "could not re-read the resource before writing (" + re.msg + "); nothing was written",
				Details: map[string]any{"rule": re.rule, "phase": "re-read"}}
		case err != nil:
			return nil, err
		}
	}
	ifMatch := ""
	if op.State != nil {
		ifMatch = op.State.ETag
	}
	w, ee := a.writeOnce(ctx, t, r, op.Key, ifMatch, "", ResultBodyBytes)
	if ee != nil {
		return nil, ee
	}
	out := Result{Status: w.status, Body: w.excerpt, BodyTruncated: w.cut}
	if prev != nil {
		rd, rerr := a.readState(ctx, t, r)
		switch {
		case rerr != nil:
			out.PostStateError = rerr.msg
		case rd.gone:
			out.PostStateError = "the resource was not found after the write"
		default:
			post := take(rd.doc, prev.Fields)
			out.PostStateHash, out.PostState = post.hash(), post.raw()
		}
	}
	return json.Marshal(out)
}
