package httpreq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

// BulkResult is what a bulk http.request records, whether it succeeded or
// failed part-way: each item's outcome, and the counts.
type BulkResult struct {
	Items        []ItemResult `json:"items"`
	Total        int          `json:"total"`
	Written      int          `json:"written"`
	Failed       int          `json:"failed"`
	NotAttempted int          `json:"not_attempted"`
}

// Outcomes of one item of a bulk.
const (
	OutcomeWritten      = "written"
	OutcomeRefused      = "refused" // 412 to its If-Match
	OutcomeFailed       = "failed"
	OutcomeNotAttempted = "not_attempted"
)

// ItemResult is what happened to one item.
type ItemResult struct {
	Item          int    `json:"item"`
	Method        string `json:"method"`
	Path          string `json:"path"`
	Outcome       string `json:"outcome"`
	Status        int    `json:"status,omitempty"`
	Body          string `json:"body,omitempty"`
	BodyTruncated bool   `json:"body_truncated,omitempty"`
	// OutcomeUnknown is set for a failed item: true when its write went
	// out and no answer came back (it may have happened).
	OutcomeUnknown *bool      `json:"outcome_unknown,omitempty"`
	Error          *ItemError `json:"error,omitempty"`
	// ReceiptID is the jti of the item's receipt, "op_…:N".
	ReceiptID      string `json:"receipt_id,omitempty"`
	PostStateHash  string `json:"post_state_hash,omitempty"`
	PostStateError string `json:"post_state_error,omitempty"`
}

// ItemError is the error of a refused or failed item.
type ItemError struct {
	Code    approval.Code `json:"code"`
	Message string        `json:"message"`
}

// bulkResultBodyBytes bounds the response bodies a bulk's result keeps,
// all items together.
const bulkResultBodyBytes = 16 << 10

// executeBulk runs a bulk operation: every state-bound item is read again
// first, and if any moved, nothing is written (stale_state naming each
// item and what changed). Then the items are written in order, each once,
// with If-Match (its own ETag), Idempotency-Key "op_…:N" and its own
// receipt (jti "op_…:N"); the first that fails stops the rest. The result
// lists every item's outcome and is returned with the error when one
// failed: the operation fails with partial true in error.details when
// anything was (or may have been) written, and the counts.
func (a *Action) executeBulk(ctx context.Context, op *approval.Operation, t *target, r *Request) (json.RawMessage, error) {
	binds, err := decodeBulkState(op.State)
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "the stored state binding is unreadable; nothing was written"}
	}
	if len(t.boundItems(r)) > 0 {
		_, at, err := a.verifyItems(ctx, t, r, op.State, "the operation was prepared")
		var re *readError
		switch {
		case errors.As(err, &re):
			return nil, &approval.ExecError{Code: approval.CodeExecutionFailed,
				Message: fmt.Sprintf("could not re-read item %d before writing (%s); nothing was written", at+1, re.msg),
				Details: map[string]any{"rule": re.rule, "phase": "re-read", "item": at + 1}}
		case err != nil:
			return nil, err
		}
	}

	total := len(r.Items)
	res := BulkResult{Total: total, Items: make([]ItemResult, total)}
	excerpt := max(64, min(ResultBodyBytes, bulkResultBodyBytes/total))
	minting := approval.CountersignerFrom(ctx) != nil
	var failure *approval.ExecError
	failedAt := -1
	for i, it := range r.Items {
		n := strconv.Itoa(i + 1)
		ir := &res.Items[i]
		*ir = ItemResult{Item: i + 1, Method: it.Method, Path: it.Path, Outcome: OutcomeNotAttempted}
		if failure != nil {
			res.NotAttempted++
			continue
		}
		// A write cut off by the execution's deadline would leave its
		// outcome unknown: do not start one that may not finish.
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < t.timeout {
			failure, failedAt = &approval.ExecError{Code: approval.CodeExecutionFailed,
				Message: fmt.Sprintf("the execution ran out of time before item %d could be written (each write may take up to %s)", i+1, t.timeout),
				Details: map[string]any{"phase": "write", "rule": "execution_time"}}, i
			res.NotAttempted++
			continue
		}
		ifMatch := ""
		if b := binds[i+1]; b != nil {
			ifMatch = b.ETag
		}
		w, ee := a.writeOnce(ctx, t, it, op.Key+":"+n, ifMatch, n, excerpt)
		if minting && (ee == nil || ee.Details["phase"] != "receipt") {
			ir.ReceiptID = op.Key + ":" + n
		}
		if ee != nil {
			ir.Outcome, ir.Error = OutcomeFailed, &ItemError{Code: ee.Code, Message: ee.Message}
			if ee.Code == approval.CodePreconditionFailed {
				ir.Outcome = OutcomeRefused
			} else {
				u := ee.OutcomeUnknown
				ir.OutcomeUnknown = &u
			}
			if st, ok := ee.Details["status"].(int); ok {
				ir.Status = st
			}
			failure, failedAt = ee, i
			res.Failed++
			continue
		}
		ir.Outcome, ir.Status, ir.Body, ir.BodyTruncated = OutcomeWritten, w.status, w.excerpt, w.cut
		res.Written++
	}
	a.postStates(ctx, t, r, binds, &res)
	out, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if failure == nil {
		return out, nil
	}
	return out, bulkFailure(res, failedAt, r.Items[failedAt], failure)
}

// postStates reads the state of every written, state-bound item right
// after the writes, for undo to bind to.
func (a *Action) postStates(ctx context.Context, t *target, r *Request, binds map[int]*itemBinding, res *BulkResult) {
	var which []int
	for i, ir := range res.Items {
		if ir.Outcome == OutcomeWritten && binds[i+1] != nil {
			which = append(which, i)
		}
	}
	if len(which) == 0 {
		return
	}
	reads, errs := a.readItems(ctx, t, r.Items, which, false)
	for _, i := range which {
		ir := &res.Items[i]
		switch rd := reads[i]; {
		case errs[i] != nil:
			ir.PostStateError = errs[i].msg
		case rd == nil || rd.gone:
			ir.PostStateError = "the resource was not found after the write"
		default:
			ir.PostStateHash = take(rd.doc, binds[i+1].Fields).hash()
		}
	}
}

// bulkFailure is the operation's error when item at failed (or could not
// be started): its code and outcome_unknown are the item's; details hold
// partial (something was, or may have been, written), the counts, and
// the item.
func bulkFailure(res BulkResult, at int, it *Request, ee *approval.ExecError) *approval.ExecError {
	var written, skipped []int
	for _, ir := range res.Items {
		switch ir.Outcome {
		case OutcomeWritten:
			written = append(written, ir.Item)
		case OutcomeNotAttempted:
			if ir.Item != at+1 {
				skipped = append(skipped, ir.Item)
			}
		}
	}
	what := ee.Message
	if ee.Code == approval.CodePreconditionFailed {
		what = fmt.Sprintf("the target refused it because the resource changed after it was checked (412 to If-Match %v)", ee.Details["if_match"])
	}
	msg := fmt.Sprintf("item %d of %d (%s %s): %s", at+1, res.Total, it.Method, it.Path, strings.TrimSuffix(what, "."))
	switch {
	case len(written) == 0:
		msg += ". No item was written"
	default:
		msg += fmt.Sprintf(". %s %s written before it", itemList(written), plural(len(written), "was", "were"))
	}
	if len(skipped) > 0 {
		msg += fmt.Sprintf("; %s %s not attempted", strings.ToLower(itemList(skipped)), plural(len(skipped), "was", "were"))
	}
	unknown := ee.OutcomeUnknown && ee.Code == approval.CodeExecutionFailed
	d := map[string]any{}
	for k, v := range ee.Details {
		d[k] = v
	}
	d["item"], d["partial"] = at+1, len(written) > 0 || unknown
	d["total"], d["written"], d["failed"], d["not_attempted"] = res.Total, res.Written, res.Failed, res.NotAttempted
	return &approval.ExecError{Code: ee.Code, Message: msg, OutcomeUnknown: unknown, Details: d}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
