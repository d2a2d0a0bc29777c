// Package chatdecide holds the decision rules of the chat channels (Slack,
// Microsoft Teams), where the channel authenticates the clicking human and
// countersign maps them to an approver: who may decide what, and the
// explanation a refused click gets. One definition, so that a click counts
// under exactly the same rules wherever it comes from; each channel only
// formats dates and escapes its own markup.
package chatdecide

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

// Texts every chat channel shows the same way.
const (
	Unavailable   = "countersign could not record this right now (a temporary problem). Nothing was recorded; try again in a moment."
	NotAnApprover = "You are not an approver of this operation, so your click counts for nothing. Nothing was recorded."
	BadButton     = "This button is not a valid countersign button. Nothing was recorded."
)

// Rules explains decisions in one channel's markup.
type Rules struct {
	// Date formats a time for the channel (Slack date tokens, plain UTC).
	Date func(time.Time) string
	// Escape makes approver-chosen text safe in the channel's markup.
	Escape func(string) string
	Log    *slog.Logger
	// Channel names the channel in logs ("slack", "teams").
	Channel string
}

func (r Rules) esc(s string) string {
	if r.Escape == nil {
		return s
	}
	return r.Escape(s)
}

// Precheck says why approver a may not decide op now, without deciding
// ("" when they may). Reject (which asks for a reason first) and Review
// (which opens the whole operation) call it; the decision itself is
// checked again when it is recorded.
func (r Rules) Precheck(op *approval.Operation, err error, a *approval.Approver, hash string, now time.Time) string {
	if err != nil {
		return r.Explain(op, approval.DecideResult{}, err, a)
	}
	switch {
	case !op.HasApprover(a.ID):
		if op.Route.ForbidSelfApproval && op.OnBehalfOf == a.ID {
			return r.Explain(op, approval.DecideResult{}, &approval.Refusal{Reason: "you cannot approve an operation an agent prepared on your behalf"}, a)
		}
		return r.Explain(op, approval.DecideResult{}, &approval.Refusal{Reason: "you are not an approver of this operation"}, a)
	case op.Decided(a.ID):
		return r.Explain(op, approval.DecideResult{Outcome: approval.DecideAlreadyDecided}, nil, a)
	case op.EffectiveStatus(now) == approval.StatusExpired:
		return r.Explain(op, approval.DecideResult{Outcome: approval.DecideExpired}, nil, a)
	case op.Status != approval.StatusPending:
		return r.Explain(op, approval.DecideResult{Outcome: approval.DecideNotPending, Status: op.Status}, nil, a)
	case op.PayloadHash != hash:
		return r.Explain(op, approval.DecideResult{Outcome: approval.DecideHashMismatch}, nil, a)
	}
	return ""
}

// Explain turns the result of a decision (approval.Service.DecideAs) into
// the explanation the human sees, or "" when the decision counted.
func (r Rules) Explain(op *approval.Operation, res approval.DecideResult, err error, a *approval.Approver) string {
	var ref *approval.Refusal
	switch {
	case errors.As(err, &ref):
		return capitalize(ref.Reason) + ". Nothing was recorded."
	case approval.ErrorCode(err) == approval.CodeNotFound:
		return "This operation no longer exists (finished operations are removed after their retention). Nothing was recorded."
	case err != nil:
		if r.Log != nil {
			r.Log.Error(r.Channel+": decision failed", "approver", a.ID, "err", err)
		}
		return Unavailable
	}
	switch res.Outcome {
	case approval.DecideRecorded, approval.DecideApproved, approval.DecideRejected:
		return ""
	case approval.DecideAlreadyDecided, approval.DecideNotPending:
		if op != nil {
			if d := DecisionOf(op, a.ID); d != nil {
				verb := "approved"
				if op.Rejection != nil && op.Rejection.Approver == a.ID {
					verb = "rejected"
				}
				return fmt.Sprintf("You already %s this operation (via %s, %s); a decision cannot be changed. Nothing new was recorded.",
					verb, r.esc(d.Via), r.Date(d.At))
			}
		}
		if res.Outcome == approval.DecideAlreadyDecided {
			return "You have already decided this operation, and a decision cannot be changed. Nothing new was recorded."
		}
		st := res.Status
		if op != nil && st == "" {
			st = op.Status
		}
		return "This operation is no longer waiting for decisions: it is " + strings.ReplaceAll(string(st), "_", " ") +
			". Nothing was recorded."
	case approval.DecideExpired:
		s := "The approval window has ended, so the operation expired and nothing was done."
		if op != nil && !op.ExpiresAt.IsZero() {
			s = "The approval window ended " + r.Date(op.ExpiresAt) + ", so the operation expired and nothing was done."
		}
		return s
	case approval.DecideHashMismatch:
		return "This button does not match the operation: its payload hash differs from the one approved here. Nothing was recorded."
	}
	return "countersign did not record this (" + r.esc(string(res.Outcome)) + ")."
}

// DecisionOf is approver's decision of op, or nil.
func DecisionOf(op *approval.Operation, approver string) *approval.Decision {
	if op.Rejection != nil && op.Rejection.Approver == approver {
		return op.Rejection
	}
	for i := range op.Approvals {
		if op.Approvals[i].Approver == approver {
			return &op.Approvals[i]
		}
	}
	return nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
