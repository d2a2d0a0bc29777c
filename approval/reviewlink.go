package approval

import "context"

// ReviewLink mints a personal approval link for one approver, for a
// channel that authenticated the human itself (Slack) but cannot show the
// operation whole there: it sends the link to that person only (an
// ephemeral message), and they review and decide on the page. The rule is
// MayDecide's: an approver of the operation, who has not decided, while
// it is pending, for the payload hash they were shown.
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
	if err := MayDecide(op, approverID, payloadHash, s.now()); err != nil {
		return "", err
	}
	claims := NewLinkClaims(op.Key, approverID, via, op.ExpiresAt)
	ok, err := s.store.AddCapability(ctx, op.Ref(), claims.NonceHash(),
		Capability{Approver: approverID, Channel: via, Expires: claims.Expires}, s.now())
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &Refusal{Code: RefusedNotPending, Reason: "this operation is no longer waiting for decisions"}
	}
	ev := s.event(op, "review_link", "approver:"+approverID, via)
	ev.Details = map[string]any{"why": "the channel cannot show the operation whole"}
	s.emit(ev)
	return s.publicURL + "/a/" + s.links.Sign(claims, op.PayloadHash), nil
}
