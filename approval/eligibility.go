package approval

import (
	"context"
	"errors"
	"strings"
	"time"
)

// RefusalCode says, stably, why a human may not decide; the Reason of a
// Refusal is for people and may change.
type RefusalCode string

const (
	RefusedNotApprover  RefusalCode = "not_approver"     // not on the route (nor an escalation's approver)
	RefusedSelfApproval RefusalCode = "self_approval"    // the person the agent acted for, on a route that forbids it
	RefusedDecided      RefusalCode = "already_decided"  // this approver approved or rejected already
	RefusedExpired      RefusalCode = "expired"          // the approval window ended (recorded or not)
	RefusedNotPending   RefusalCode = "not_pending"      // approved, rejected, canceled, running, finished …
	RefusedHashMismatch RefusalCode = "hash_mismatch"    // the human was shown another payload
	RefusedStepUp       RefusalCode = "step_up_required" // a passkey route, decided where no passkey can be given
	RefusedNoPasskey    RefusalCode = "no_passkey"       // a passkey route, and this approver has none enrolled
	RefusedPasskey      RefusalCode = "passkey_refused"  // the assertion did not verify (audited)
)

// Refusal is returned when a human may not decide (or edit, or revoke)
// an operation. Code is set by the eligibility rule (MayDecide) and
// step-up; other refusals carry only a Reason.
type Refusal struct {
	Code   RefusalCode
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// RefusalOf is the code of err when it is a *Refusal, else "".
func RefusalOf(err error) RefusalCode {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// MayDecide is the one rule of "may this approver decide this operation
// now, for the payload they were shown?": nil when they may, else a
// *Refusal whose Code says why, checked in this order: not an approver
// (self_approval when they are the one the agent acted for, on a route
// that forbids it), already_decided, expired (by the clock, even before a
// worker records it), not_pending, hash_mismatch.
//
// It is the pre-check every path calls: the approval page (OpenLink), the
// inbox (Inbox, OpenAs), personal review links (ReviewLink), the chat
// channels (Eligibility, before opening a modal or minting a link), and
// decide itself (step-up is asked for only when the rule lets the decision
// through). It reads op as loaded, so it can be overtaken by a concurrent
// decision: the authority at write time is the decide script
// (store/lua/decide.lua), which checks expiry, status, payload hash, the
// link's nonce and a previous decision atomically and answers a
// DecideOutcome. Keep the two in step: a refusal here must be one the
// script gives too (an expiry it has recorded reads there as not_pending,
// status expired).
func MayDecide(op *Operation, approverID, payloadHash string, now time.Time) error {
	if err := mayAct(op, approverID); err != nil {
		return err
	}
	switch st := op.EffectiveStatus(now); {
	case op.Decided(approverID):
		return &Refusal{Code: RefusedDecided, Reason: "you have already decided this operation, and a decision cannot be changed"}
	case st == StatusExpired:
		return &Refusal{Code: RefusedExpired, Reason: "the approval window has ended, so the operation expired and nothing was done"}
	case st != StatusPending:
		return &Refusal{Code: RefusedNotPending, Reason: "this operation is no longer waiting for decisions: it is " + strings.ReplaceAll(string(st), "_", " ")}
	case payloadHash != op.PayloadHash:
		return &Refusal{Code: RefusedHashMismatch, Reason: "this does not match the operation you were shown: its payload hash differs"}
	}
	return nil
}

// mayAct is the part of MayDecide about the person, whatever the
// operation's state: decide applies it in Go, the store the rest.
func mayAct(op *Operation, approverID string) error {
	if op.HasApprover(approverID) {
		return nil
	}
	if op.Route.ForbidSelfApproval && approverID == op.OnBehalfOf {
		return &Refusal{Code: RefusedSelfApproval, Reason: "you cannot approve an operation an agent prepared on your behalf"}
	}
	return &Refusal{Code: RefusedNotApprover, Reason: "you are not an approver of this operation"}
}

// Means is how the decision asked about would be made.
type Means int

const (
	// OnPage: on the approval page (or through a personal link to it),
	// which brings a passkey assertion when the route asks for one.
	OnPage Means = iota
	// InChat: a chat click or modal (Slack, Teams), which cannot carry a
	// passkey, so a step-up route refuses it.
	InChat
)

// Eligibility reads operation key and applies MayDecide for approverID
// and the payload hash they were shown; for a decision made InChat on a
// step-up route it refuses too (step_up_required, or no_passkey when the
// approver has none enrolled), as decide would. It decides and records
// nothing. The operation is returned whenever it could be read, so the
// caller can explain a refusal.
//
// Returns not_found, unavailable (the store), or a *Refusal.
func (s *Service) Eligibility(ctx context.Context, key, approverID, payloadHash string, how Means) (*Operation, error) {
	op, err := s.load(ctx, Ref{Key: key})
	if err != nil {
		return nil, err
	}
	if err := MayDecide(op, approverID, payloadHash, s.now()); err != nil {
		return op, err
	}
	if how == InChat && op.Route.StepUp != "" {
		return op, s.chatStepUp(ctx, approverID)
	}
	return op, nil
}

// chatStepUp is the refusal of a chat decision on a step-up route.
func (s *Service) chatStepUp(ctx context.Context, approverID string) error {
	se := &StepUpError{Code: "missing"}
	code := RefusedStepUp
	if s.passkeys == nil || s.passkeyStore == nil {
		se.Code, code = "no_passkey", RefusedNoPasskey
	} else if creds, err := s.passkeyStore.PasskeyCredentials(ctx, approverID); err != nil {
		return err
	} else if len(creds) == 0 {
		se.Code, code = "no_passkey", RefusedNoPasskey
	}
	return &Refusal{Code: code, Reason: stepUpReason(se)}
}
