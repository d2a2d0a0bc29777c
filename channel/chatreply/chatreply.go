// Package chatreply is what the chat channels (Slack, Microsoft Teams)
// tell a human whose click did not count, in one wording: each channel
// only formats dates and escapes its own markup. Whether the click may
// count is not decided here: that is the domain's one rule
// (approval.MayDecide, through approval.Service.Eligibility before a
// modal or a link, and the decision itself through DecideAs).
package chatreply

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

// Replies explains refused clicks in one channel's markup.
type Replies struct {
	// Date formats a time for the channel (Slack date tokens, plain UTC).
	Date func(time.Time) string
	// Escape makes approver-chosen text safe in the channel's markup.
	Escape func(string) string
	Log    *slog.Logger
	// Channel names the channel in logs ("slack", "teams").
	Channel string
}

func (r Replies) esc(s string) string {
	if r.Escape == nil {
		return s
	}
	return r.Escape(s)
}

// Explain turns the answer of the domain (approval.Service.Eligibility,
// ReviewLink, DecideAs) into the explanation the human sees, or "" when
// the decision counted. A refusal of the eligibility rule reads like the
// decide script's outcome of the same kind.
func (r Replies) Explain(op *approval.Operation, res approval.DecideResult, err error, a *approval.Approver) string {
	if o, ok := outcomeOf[approval.RefusalOf(err)]; ok {
		res, err = approval.DecideResult{Outcome: o}, nil
	}
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

// outcomeOf is the decide script's outcome for the refusals of the
// eligibility rule that the script gives too.
var outcomeOf = map[approval.RefusalCode]approval.DecideOutcome{
	approval.RefusedDecided:      approval.DecideAlreadyDecided,
	approval.RefusedExpired:      approval.DecideExpired,
	approval.RefusedNotPending:   approval.DecideNotPending,
	approval.RefusedHashMismatch: approval.DecideHashMismatch,
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
