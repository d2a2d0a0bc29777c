package approval

import (
	"context"
	"strings"
)

// ReviewLink mints a personal approval link for one approver, for a
// channel that authenticated the human itself (Slack) but cannot show the
// operation whole there: it sends the link to that person only (an
// ephemeral message), and they review and decide on the page. The rules
// are those of deciding: an approver of the operation, who has not
// decided, while it is pending, for the payload hash they were shown.
// There is no way to reach it with an agent's API key.
//
// The link is a capability, like an emailed one (single use, bound to
// the approver, the channel and the payload hash, stored as a hash):
// never log it. Returns not_found, or a *Refusal saying why not.
func (s *Service) ReviewLink(ctx context.Context, key, approverID, via, payloadHash string) (string, error) {
	op, err := s.load(ctx, Ref{Key: key})
	if err != nil {
		return "", err
	}
	if !op.HasApprover(approverID) {
		if op.Route.ForbidSelfApproval && approverID == op.OnBehalfOf {
			return "", &Refusal{Reason: "you cannot approve an operation an agent prepared on your behalf"}
		}
		return "", &Refusal{Reason: "you are not an approver of this operation"}
	}
	if op.Decided(approverID) {
		return "", &Refusal{Reason: "you have already decided this operation, and a decision cannot be changed"}
	}
	if st := op.EffectiveStatus(s.now()); st != StatusPending {
		return "", &Refusal{Reason: "this operation is no longer waiting for decisions: it is " + strings.ReplaceAll(string(st), "_", " ")}
	}
	if payloadHash != op.PayloadHash {
		return "", &Refusal{Reason: "this button does not match the operation: its payload hash differs"}
	}
	claims := NewLinkClaims(op.Key, approverID, via, op.ExpiresAt)
	ok, err := s.store.AddCapability(ctx, op.Ref(), claims.NonceHash(),
		Capability{Approver: approverID, Channel: via, Expires: claims.Expires}, s.now())
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &Refusal{Reason: "this operation is no longer waiting for decisions"}
	}
	ev := s.event(op, "review_link", "approver:"+approverID, via)
	ev.Details = map[string]any{"why": "the channel cannot show the operation whole"}
	s.emit(ev)
	return s.publicURL + "/a/" + s.links.Sign(claims, op.PayloadHash), nil
}
