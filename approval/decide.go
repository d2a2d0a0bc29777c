package approval

import (
	"context"
	"errors"
	"strings"
	"time"
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
	LinkReplaced LinkProblem = "replaced" // a newer link (a reminder's) replaced it: 410
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
	op, c, err := s.loadLink(ctx, claims)
	if ErrorCode(err) == CodeNotFound {
		return &LinkView{Problem: LinkUnknown}, nil
	}
	if err != nil {
		return nil, err
	}
	if s.links.VerifyLink(token, op.PayloadHash) != nil {
		return &LinkView{Problem: LinkUnknown}, nil
	}
	if c == nil || c.Approver != claims.Approver || c.Channel != claims.Channel {
		return &LinkView{Problem: LinkUnknown}, nil
	}
	v := &LinkView{Op: op, Claims: claims, NonceHash: claims.NonceHash(), Approver: s.policy.Approver(claims.Approver),
		Message: BuildMessage(op, s.policy, s.now())}
	if v.Approver == nil {
		v.Approver = &Approver{ID: claims.Approver}
	}
	switch err := MayDecide(op, claims.Approver, op.PayloadHash, s.now()); {
	case RefusalOf(err) == RefusedDecided:
		v.Problem = LinkUsed
	case c.Revoked && op.Status == StatusPending:
		v.Problem = LinkReplaced
	case err != nil:
		v.Problem = linkProblem(err)
	case !s.now().Before(claims.Expires): // the link's own window
		v.Problem = LinkExpired
	default:
		s.recheckView(ctx, v, op)
	}
	return v, nil
}

// linkProblem is how a page shows a refusal of MayDecide.
func linkProblem(err error) LinkProblem {
	if err == nil {
		return LinkOK
	}
	switch RefusalOf(err) {
	case RefusedDecided:
		return LinkUsed
	case RefusedExpired:
		return LinkExpired
	case RefusedNotPending:
		return LinkFinished
	}
	return LinkUnknown // not this person's to decide
}

// loadLink reads the operation of a link (recording its expiry if the
// window passed) and the link's record, nil when none is stored: in one
// read.
func (s *Service) loadLink(ctx context.Context, claims LinkClaims) (*Operation, *Capability, error) {
	if !ValidOperationKey(claims.Operation) {
		op, err := s.load(ctx, Ref{Key: claims.Operation})
		if err != nil {
			return nil, nil, err
		}
		c, err := s.store.Capability(ctx, op.Ref(), claims.NonceHash())
		return op, c, err
	}
	op, c, err := s.store.GetLink(ctx, Ref{Key: claims.Operation}, claims.NonceHash())
	if err != nil {
		return nil, nil, err
	}
	// An expiry recorded now changes no link record.
	op, err = s.current(ctx, op)
	return op, c, err
}

// recheckView re-reads the target of op, still decidable, for the view v
// (the page, the inbox). When the re-check fails the operation nothing can
// be decided now: v shows it as it stands (failed, stale_state, what
// changed).
func (s *Service) recheckView(ctx context.Context, v *LinkView, op *Operation) {
	rc, ok := optional[Rechecker](s.actions[op.Action])
	if !ok {
		return
	}
	if v.Stale = s.recheck(ctx, rc, op); v.Stale != nil {
		v.Problem = LinkFinished
		if cur, err := s.store.Get(ctx, op.Ref()); err == nil {
			v.Op = cur
			v.Message = BuildMessage(cur, s.policy, s.now())
		}
	}
}

// RecheckTimeout bounds the approval page's re-read of a state-bound
// operation's target. The re-read only warns early (execution re-reads
// anyway), so a slow target must not spend the page's whole request
// budget: the decision still needs the store after it, and the page must
// answer in time.
const RecheckTimeout = 1500 * time.Millisecond

// recheck asks a state-bound action whether the state still matches; a
// stale operation is failed at once so nobody approves what cannot run.
func (s *Service) recheck(ctx context.Context, rc Rechecker, op *Operation) error {
	rctx, cancel := context.WithTimeout(ctx, RecheckTimeout)
	err := rc.Recheck(rctx, op)
	cancel()
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
	if _, moved, merr := s.store.Stale(ctx, op.Ref(), StaleTransition{Step: s.step(ev), Error: opErr}); merr == nil && moved {
		s.emit(ev)
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
	return s.DecideOpened(ctx, v, approve, reason)
}

// DecideOpened is DecideByLink for a link the caller has just opened
// (OpenLink answered LinkOK): the page checks its CSRF token against the
// opened link, and the decision need not read it all again. The decide
// script still checks the link's nonce and the payload hash atomically.
func (s *Service) DecideOpened(ctx context.Context, v *LinkView, approve bool, reason string) (*LinkView, DecideResult, error) {
	if v.Stale != nil {
		v.Op, _ = s.store.Get(ctx, v.Op.Ref())
		v.Problem = LinkFinished
		return v, DecideResult{}, nil
	}
	res, err := s.decide(ctx, v.Op, v.Claims.Approver, v.Claims.Channel, v.Op.PayloadHash, approve, reason, v.NonceHash)
	if err != nil {
		return v, res, err
	}
	if op, gerr := s.after(ctx, v.Op.Ref(), res); gerr == nil {
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
	op, err := s.load(ctx, Ref{Key: key})
	if err != nil {
		return nil, DecideResult{}, err
	}
	// Only a decision the rule lets through re-reads the target.
	if approve && MayDecide(op, approverID, payloadHash, s.now()) == nil {
		if rc, ok := optional[Rechecker](s.actions[op.Action]); ok {
			if stale := s.recheck(ctx, rc, op); stale != nil {
				cur, gerr := s.store.Get(ctx, op.Ref())
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
	cur, err := s.after(ctx, op.Ref(), res)
	return cur, res, err
}

// after is the operation as a decision left it: the store's answer, or a
// read when it gave none.
func (s *Service) after(ctx context.Context, ref Ref, res DecideResult) (*Operation, error) {
	if res.Operation != nil {
		return res.Operation, nil
	}
	return s.store.Get(ctx, ref)
}

func (s *Service) decide(ctx context.Context, op *Operation, approverID, via, payloadHash string, approve bool, reason, nonceHash string) (DecideResult, error) {
	// Who may decide is checked here; the state (decided, expired, not
	// pending, another payload) by the decide script, atomically, which
	// answers it as an outcome the caller shows.
	if err := mayAct(op, approverID); err != nil {
		return DecideResult{}, err
	}
	if err := s.stepUp(ctx, op, approverID, via, payloadHash, approve); err != nil {
		return DecideResult{}, err
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
	res, err := s.store.Decide(ctx, op.Ref(), DecideTransition{
		Step: s.step(ev), Decision: d, Approve: approve, Required: op.Route.Required, NonceHash: nonceHash,
		QuorumEvent: quorum, ExpireEvent: exp,
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
	case DecideExpired:
		s.emit(exp)
	}
	return res, nil
}
