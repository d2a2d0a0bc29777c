package approval

import (
	"context"
	"errors"
	"strings"
)

// Humans decide through a capability: a signed link (email, console) or a
// Slack click verified by Slack's signature and mapped to an approver.
// Neither path is reachable with an agent's API key.

// LinkProblem says why a link cannot be used; the page shows a plain
// explanation with the matching HTTP status.
type LinkProblem string

const (
	LinkOK       LinkProblem = ""
	LinkUnknown  LinkProblem = "unknown"  // malformed, tampered, unknown key or nonce: 404
	LinkExpired  LinkProblem = "expired"  // the approval window ended: 410
	LinkUsed     LinkProblem = "used"     // this approver already decided: 409
	LinkFinished LinkProblem = "finished" // the operation is no longer awaiting decisions: 409
)

// LinkView is what an approval page shows for a link.
type LinkView struct {
	Problem   LinkProblem
	Op        *Operation // nil when Problem is LinkUnknown
	Approver  *Approver
	Claims    LinkClaims
	Message   Message
	Stale     error // non-nil when the remote state moved since prepare
	NonceHash string
}

// OpenLink checks a link without deciding anything: GET and HEAD of the
// approval page call it, and so may any mail scanner. It never consumes
// the link and never changes the operation except to record an expiry that
// already happened.
func (s *Service) OpenLink(ctx context.Context, token string) (*LinkView, error) {
	claims, err := s.links.ParseLink(token)
	if err != nil {
		return &LinkView{Problem: LinkUnknown}, nil
	}
	op, err := s.load(ctx, claims.Operation)
	if ErrorCode(err) == CodeNotFound {
		return &LinkView{Problem: LinkUnknown}, nil
	}
	if err != nil {
		return nil, err
	}
	if s.links.VerifyLink(token, op.PayloadHash) != nil {
		return &LinkView{Problem: LinkUnknown}, nil
	}
	c, err := s.store.Capability(ctx, op.Key, claims.NonceHash())
	if err != nil {
		return nil, err
	}
	if c == nil || c.Approver != claims.Approver || c.Channel != claims.Channel {
		return &LinkView{Problem: LinkUnknown}, nil
	}
	v := &LinkView{Op: op, Claims: claims, NonceHash: claims.NonceHash(), Approver: s.policy.Approver(claims.Approver),
		Message: BuildMessage(op, s.policy, s.now())}
	if v.Approver == nil {
		v.Approver = &Approver{ID: claims.Approver}
	}
	switch {
	case op.Decided(claims.Approver):
		v.Problem = LinkUsed
	case op.Status == StatusExpired || (op.Status == StatusPending && !s.now().Before(claims.Expires)):
		v.Problem = LinkExpired
	case op.Status != StatusPending:
		v.Problem = LinkFinished
	default:
		if rc, ok := s.actions[op.Action].(Rechecker); ok {
			if v.Stale = s.recheck(ctx, rc, op); v.Stale != nil {
				// The re-check failed the operation: nothing can be decided
				// now. Show it as it stands (failed, stale_state, what changed).
				v.Problem = LinkFinished
				if cur, err := s.store.Get(ctx, op.Key); err == nil {
					v.Op = cur
					v.Message = BuildMessage(cur, s.policy, s.now())
				}
			}
		}
	}
	return v, nil
}

// recheck asks a state-bound action whether the state still matches; a
// stale operation is failed at once so nobody approves what cannot run.
func (s *Service) recheck(ctx context.Context, rc Rechecker, op *Operation) error {
	err := rc.Recheck(ctx, op)
	if err == nil {
		return nil
	}
	var ee *ExecError
	if !errors.As(err, &ee) || ee.Code != CodeStaleState {
		s.log.Warn("recheck failed", "operation", op.Key, "err", err)
		return nil // cannot tell; execution re-checks anyway
	}
	ev := s.event(op, "stale", "system", "")
	ev.Status = StatusFailed
	ev.Outcome = string(CodeStaleState)
	ev.Details = map[string]any{"error": ee.Message}
	opErr := &OpError{Code: ee.Code, Message: ee.Message, Details: ee.Details}
	if _, moved, merr := s.store.Move(ctx, op.Key, MoveTransition{
		From: []Status{StatusPending}, To: StatusFailed, Now: s.now(), Error: opErr, Event: ev, TTL: s.retention,
	}); merr == nil && moved {
		s.emit(ev)
		s.wake(ctx, op.Key)
	}
	return ee
}

// DecideByLink records the decision of the link's approver. It is called
// only for a POST from the rendered page with a valid CSRF token.
func (s *Service) DecideByLink(ctx context.Context, token string, approve bool, reason string) (*LinkView, DecideResult, error) {
	v, err := s.OpenLink(ctx, token)
	if err != nil || v.Problem != LinkOK {
		return v, DecideResult{}, err
	}
	if v.Stale != nil {
		v.Op, _ = s.store.Get(ctx, v.Op.Key)
		v.Problem = LinkFinished
		return v, DecideResult{}, nil
	}
	res, err := s.decide(ctx, v.Op, v.Claims.Approver, v.Claims.Channel, v.Op.PayloadHash, approve, reason, v.NonceHash)
	if err != nil {
		return v, res, err
	}
	if op, gerr := s.store.Get(ctx, v.Op.Key); gerr == nil {
		v.Op = op
		v.Message = BuildMessage(op, s.policy, s.now())
	}
	switch res.Outcome {
	case DecideAlreadyDecided:
		v.Problem = LinkUsed
	case DecideExpired:
		v.Problem = LinkExpired
	case DecideNotPending:
		v.Problem = LinkFinished
	case DecideUnknownLink, DecideHashMismatch:
		v.Problem = LinkUnknown
	}
	return v, res, nil
}

// DecideAs records a decision made through a channel that authenticated
// the human itself (Slack). payloadHash is the hash the human was shown;
// it must match the operation's.
//
// Returns not_found, or a *Refusal saying why this human may not decide.
func (s *Service) DecideAs(ctx context.Context, key, approverID, via, payloadHash string, approve bool, reason string) (*Operation, DecideResult, error) {
	op, err := s.load(ctx, key)
	if err != nil {
		return nil, DecideResult{}, err
	}
	if approve && op.Status == StatusPending && op.Route.HasApprover(approverID) {
		if rc, ok := s.actions[op.Action].(Rechecker); ok {
			if stale := s.recheck(ctx, rc, op); stale != nil {
				cur, gerr := s.store.Get(ctx, key)
				if gerr != nil {
					cur = op
				}
				return cur, DecideResult{Outcome: DecideNotPending}, nil
			}
		}
	}
	res, err := s.decide(ctx, op, approverID, via, payloadHash, approve, reason, "")
	if err != nil {
		return op, res, err
	}
	cur, err := s.store.Get(ctx, key)
	return cur, res, err
}

// Refusal is returned when a human may not decide an operation.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

func (s *Service) decide(ctx context.Context, op *Operation, approverID, via, payloadHash string, approve bool, reason, nonceHash string) (DecideResult, error) {
	if !op.Route.HasApprover(approverID) {
		if op.Route.ForbidSelfApproval && approverID == op.OnBehalfOf {
			return DecideResult{}, &Refusal{Reason: "you cannot approve an operation an agent prepared on your behalf"}
		}
		return DecideResult{}, &Refusal{Reason: "you are not an approver of this operation"}
	}
	reason = strings.TrimSpace(reason)
	if len(reason) > 2000 {
		reason = reason[:2000]
	}
	now := s.now().UTC()
	d := Decision{Approver: approverID, Via: via, At: now, PayloadHash: payloadHash}
	name, status := "approval", StatusPending
	if !approve {
		name, status = "rejection", StatusRejected
		d.Reason = reason
	}
	ev := s.event(op, name, "approver:"+approverID, via)
	ev.Status = status
	ev.PayloadHash = payloadHash
	if reason != "" && !approve {
		ev.Details = map[string]any{"reason": reason}
	}
	quorum := s.event(op, "approved", "system", "")
	quorum.Status = StatusApproved
	exp := s.event(op, "expired", "system", "")
	exp.Status = StatusExpired
	if err := s.guard(ctx, op.Key); err != nil {
		return DecideResult{}, err
	}
	res, err := s.store.Decide(ctx, op.Key, DecideTransition{
		Now: now, Decision: d, Approve: approve, Required: op.Route.Required, NonceHash: nonceHash,
		Event: ev, QuorumEvent: quorum, ExpireEvent: exp, Retention: s.retention,
	})
	if err != nil {
		return res, err
	}
	switch res.Outcome {
	case DecideRecorded, DecideApproved, DecideRejected:
		s.emit(ev)
		if res.Outcome == DecideApproved {
			s.emit(quorum)
		}
		s.wake(ctx, op.Key) // execute, or update messages
	case DecideExpired:
		s.emit(exp)
	}
	return res, nil
}
