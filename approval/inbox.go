package approval

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"
)

// The approver inbox: what awaits one signed-in approver, and the same
// view of an operation that its approval page shows. Deciding from the
// inbox goes through DecideAs (via "inbox"): the session authenticated
// the human, the form carries the payload hash they were shown, and
// decide applies separation of duties, quorum, the hash check and step-up.

// ViaInbox is the channel recorded for decisions made in the inbox.
const ViaInbox = "inbox"

// MaxInbox bounds one inbox listing.
const MaxInbox = 200

// LiveStore lists operations that may still be decided (drafts, pending
// and approved ones), from an index whose size follows them rather than
// everything stored: the inbox's port, part of Store.
type LiveStore interface {
	Live(ctx context.Context, limit int) ([]*Operation, error)
}

// Inbox returns the pending operations that approverID may decide and has
// not decided, newest first, at most MaxInbox.
func (s *Service) Inbox(ctx context.Context, approverID string) ([]*Operation, error) {
	ops, err := s.store.Live(ctx, MaxAdminList)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := []*Operation{}
	for _, op := range ops {
		if MayDecide(op, approverID, op.PayloadHash, now) == nil {
			out = append(out, op)
		}
	}
	slices.SortFunc(out, func(a, b *Operation) int {
		return cmp.Or(sentAt(b).Compare(sentAt(a)), strings.Compare(a.Key, b.Key))
	})
	if len(out) > MaxInbox {
		out = out[:MaxInbox]
	}
	return out, nil
}

func sentAt(op *Operation) time.Time {
	if op.SentAt != nil {
		return *op.SentAt
	}
	return op.CreatedAt
}

// OpenAs is OpenLink for an approver the channel authenticated (the
// inbox): the operation as its page shows it, and whether this approver
// may decide it now. It decides nothing. An operation the approver may
// not decide at all reads as LinkUnknown, like a link that is not theirs.
func (s *Service) OpenAs(ctx context.Context, key, approverID string) (*LinkView, error) {
	op, err := s.load(ctx, Ref{Key: key})
	if ErrorCode(err) == CodeNotFound {
		return &LinkView{Problem: LinkUnknown}, nil
	}
	if err != nil {
		return nil, err
	}
	rule := MayDecide(op, approverID, op.PayloadHash, s.now())
	if linkProblem(rule) == LinkUnknown {
		return &LinkView{Problem: LinkUnknown}, nil
	}
	v := &LinkView{Op: op, Approver: s.approverOrID(approverID), Message: BuildMessage(op, s.policy, s.now()),
		Claims: LinkClaims{Operation: op.Key, Approver: approverID, Channel: ViaInbox, Expires: op.ExpiresAt}}
	if rule != nil {
		v.Problem = linkProblem(rule)
	} else {
		s.recheckView(ctx, v, op)
	}
	return v, nil
}
