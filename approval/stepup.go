package approval

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"time"
)

// Step-up (SPEC §11): on a route with step_up: passkey, a decision counts
// only with a WebAuthn assertion, made with user verification by a
// passkey enrolled for the deciding approver, over the challenge
// DecisionChallenge(operation key, payload hash, decision, approver). The
// assertion is bound to exactly one call: it cannot approve another
// operation, another payload, or turn a rejection into an approval. The
// check sits in the one place every decision passes (decide), so no
// channel can skip it: a Slack or Teams click carries no assertion and is
// refused; their buttons open the page instead.

// StepUpPasskey is the route setting step_up: passkey.
const StepUpPasskey = "passkey"

// MaxAssertionBytes bounds the assertion a page may submit.
const MaxAssertionBytes = 16 << 10

// PasskeyCredential is one passkey enrolled for an approver. The sign
// count is kept apart in the store and moves forward atomically.
type PasskeyCredential struct {
	ID              []byte    `json:"id"`
	PublicKey       []byte    `json:"pk"` // COSE
	AAGUID          []byte    `json:"aaguid,omitempty"`
	AttestationType string    `json:"att,omitempty"`
	AttestationFmt  string    `json:"fmt,omitempty"`
	BackupEligible  bool      `json:"be,omitempty"`
	BackupState     bool      `json:"bs,omitempty"`
	UserVerified    bool      `json:"uv,omitempty"`
	SignCount       uint32    `json:"-"`
	Created         time.Time `json:"created"`
}

// PasskeyUse is what a verified assertion says: which passkey, and its
// sign count now.
type PasskeyUse struct {
	CredentialID []byte
	SignCount    uint32
}

// Passkeys is the WebAuthn relying party (package passkey): it builds the
// options a browser needs and checks what it returns. It keeps nothing;
// the service stores credentials and sign counts through PasskeyStore.
type Passkeys interface {
	// Origin is the scheme://host where passkey pages work (enrolment
	// links are minted there).
	Origin() string
	// CreationOptions is the JSON of navigator.credentials.create's
	// options to enrol a passkey for a over challenge, user verification
	// required, excluding the passkeys a already has.
	CreationOptions(a *Approver, challenge []byte, have []PasskeyCredential) ([]byte, error)
	// Register checks a browser's attestation (JSON) against challenge and
	// returns the new credential. Returns a *StepUpError when refused.
	Register(a *Approver, challenge []byte, have []PasskeyCredential, raw []byte) (PasskeyCredential, error)
	// RequestOptions is the JSON of navigator.credentials.get's options
	// for an assertion over challenge by one of creds, user verification
	// required.
	RequestOptions(a *Approver, challenge []byte, creds []PasskeyCredential) ([]byte, error)
	// Check verifies an assertion (JSON) over challenge by one of creds,
	// with user verification, and returns the passkey used and its sign
	// count. It does not judge the sign count (the store does, atomically).
	// Returns a *StepUpError when refused.
	Check(a *Approver, challenge []byte, creds []PasskeyCredential, raw []byte) (PasskeyUse, error)
}

// PasskeyStore keeps enrolment links and passkeys: the port of step-up and
// enrolment, part of Store.
type PasskeyStore interface {
	// AddEnrolment stores an enrolment link's nonce hash for approver.
	AddEnrolment(ctx context.Context, approver, nonceHash string, ttl time.Duration) error
	// Enrolment reports whether the enrolment link is live, without using it.
	Enrolment(ctx context.Context, approver, nonceHash string) (bool, error)
	// Enrol uses up the enrolment link and stores the credential, in one
	// step; false when the link was not live (used, expired, unknown).
	Enrol(ctx context.Context, approver, nonceHash string, c PasskeyCredential) (bool, error)
	// PasskeyCredentials lists approver's passkeys with their sign counts.
	PasskeyCredentials(ctx context.Context, approver string) ([]PasskeyCredential, error)
	// UsePasskey moves a passkey's sign count to count, atomically.
	// Returns PasskeyUsed, PasskeyRegression (count did not move forward:
	// a cloned authenticator or a replay) or PasskeyUnknown.
	UsePasskey(ctx context.Context, approver string, credentialID []byte, count uint32) (PasskeyResult, error)
}

// PasskeyResult is the outcome of UsePasskey.
type PasskeyResult string

const (
	PasskeyUsed       PasskeyResult = "used"
	PasskeyRegression PasskeyResult = "regression"
	PasskeyUnknown    PasskeyResult = "unknown"
)

// Noter records an audit event on an operation without changing it (a
// refused step-up): part of Store.
type Noter interface {
	Note(ctx context.Context, ref Ref, ev Event) error
	// NoteFree records an event of principal that belongs to no operation
	// (a gateway call that passed, gateway.go) in the audit chain.
	NoteFree(ctx context.Context, principal string, ev Event) error
}

// StepUpError is a refused passkey ceremony. Code is stable and audited:
// missing, no_passkey, challenge, unknown_credential, user_verification,
// invalid, sign_count.
type StepUpError struct {
	Code   string
	Reason string
}

func (e *StepUpError) Error() string { return "step-up refused (" + e.Code + "): " + e.Reason }

// DecisionChallenge is the WebAuthn challenge of one decision: SHA-256
// over the operation key, payload hash, decision and approver id.
func DecisionChallenge(key, payloadHash string, approve bool, approver string) []byte {
	d := "reject"
	if approve {
		d = "approve"
	}
	sum := sha256.Sum256([]byte("countersign-step-up-v1\n" + key + "\n" + payloadHash + "\n" + d + "\n" + approver))
	return sum[:]
}

type assertionKey struct{}

// WithPasskeyAssertion carries a browser's assertion (JSON) to the
// decision made with ctx. It proves nothing by itself: decide verifies it
// against the decision's own challenge.
func WithPasskeyAssertion(ctx context.Context, raw []byte) context.Context {
	if len(raw) == 0 {
		return ctx
	}
	return context.WithValue(ctx, assertionKey{}, raw)
}

func assertionFrom(ctx context.Context) []byte {
	raw, _ := ctx.Value(assertionKey{}).([]byte)
	return raw
}

// StepUpOptions are what a page needs to ask for a decision's passkey.
type StepUpOptions struct {
	// Enrolled is false when the approver has no passkey yet: then the
	// page can only say so.
	Enrolled bool
	Approve  []byte // navigator.credentials.get options (JSON)
	Reject   []byte
}

// StepUpOptionsFor builds the options of both decisions of approver on op.
func (s *Service) StepUpOptionsFor(ctx context.Context, op *Operation, approverID string) (StepUpOptions, error) {
	if s.passkeys == nil || s.passkeyStore == nil {
		return StepUpOptions{}, nil
	}
	creds, err := s.passkeyStore.PasskeyCredentials(ctx, approverID)
	if err != nil || len(creds) == 0 {
		return StepUpOptions{}, err
	}
	a := s.approverOrID(approverID)
	var out StepUpOptions
	if out.Approve, err = s.passkeys.RequestOptions(a, DecisionChallenge(op.Key, op.PayloadHash, true, approverID), creds); err != nil {
		return out, err
	}
	if out.Reject, err = s.passkeys.RequestOptions(a, DecisionChallenge(op.Key, op.PayloadHash, false, approverID), creds); err != nil {
		return out, err
	}
	out.Enrolled = true
	return out, nil
}

func (s *Service) approverOrID(id string) *Approver {
	if a := s.policy.Approver(id); a != nil {
		return a
	}
	return &Approver{ID: id}
}

// stepUp demands and verifies the passkey assertion of a decision on a
// step-up route. A decision MayDecide refuses (already decided, expired,
// not pending, another payload) needs none: the store refuses it too, it
// changes nothing, and the human sees why. Every refusal is audited on the operation.
func (s *Service) stepUp(ctx context.Context, op *Operation, approverID, via, payloadHash string, approve bool) error {
	if op.Route.StepUp == "" {
		return nil
	}
	if MayDecide(op, approverID, payloadHash, s.now()) != nil {
		return nil
	}
	err := s.checkStepUp(ctx, op, approverID, approve)
	var se *StepUpError
	if !errors.As(err, &se) {
		return err // nil, or the store is unavailable
	}
	ev := s.event(op, "step_up_refused", "approver:"+approverID, via)
	ev.Outcome = se.Code
	ev.Details = map[string]any{"decision": decisionWord(approve), "reason": se.Reason}
	s.note(ctx, op, ev)
	s.log.Warn("step-up refused", "operation", op.Key, "approver", approverID, "via", via, "code", se.Code)
	return &Refusal{Code: stepUpRefusal(se), Reason: stepUpReason(se)}
}

func stepUpRefusal(se *StepUpError) RefusalCode {
	switch se.Code {
	case "missing":
		return RefusedStepUp
	case "no_passkey":
		return RefusedNoPasskey
	}
	return RefusedPasskey
}

func (s *Service) checkStepUp(ctx context.Context, op *Operation, approverID string, approve bool) error {
	raw := assertionFrom(ctx)
	if len(raw) == 0 {
		return &StepUpError{Code: "missing", Reason: "no passkey assertion came with the decision"}
	}
	if len(raw) > MaxAssertionBytes {
		return &StepUpError{Code: "invalid", Reason: "the assertion is too large"}
	}
	if s.passkeys == nil || s.passkeyStore == nil {
		return &StepUpError{Code: "no_passkey", Reason: "passkeys are not set up on this service"}
	}
	creds, err := s.passkeyStore.PasskeyCredentials(ctx, approverID)
	if err != nil {
		return err
	}
	if len(creds) == 0 {
		return &StepUpError{Code: "no_passkey", Reason: "the approver has no passkey enrolled"}
	}
	use, err := s.passkeys.Check(s.approverOrID(approverID), DecisionChallenge(op.Key, op.PayloadHash, approve, approverID), creds, raw)
	if err != nil {
		return err
	}
	res, err := s.passkeyStore.UsePasskey(ctx, approverID, use.CredentialID, use.SignCount)
	if err != nil {
		return err
	}
	switch res {
	case PasskeyUsed:
	case PasskeyRegression:
		return &StepUpError{Code: "sign_count", Reason: "the passkey's signature counter did not move forward (a cloned authenticator, or a replayed assertion)"}
	default:
		return &StepUpError{Code: "unknown_credential", Reason: "the passkey is not enrolled for this approver"}
	}
	ev := s.event(op, "step_up", "approver:"+approverID, "")
	ev.Outcome = "verified"
	ev.Details = map[string]any{"decision": decisionWord(approve), "credential": credentialLabel(use.CredentialID), "sign_count": use.SignCount}
	s.note(ctx, op, ev)
	return nil
}

// note records ev on op's audit trail.
func (s *Service) note(ctx context.Context, op *Operation, ev Event) {
	if err := s.store.Note(ctx, op.Ref(), ev); err != nil {
		s.log.Error("audit note failed", "operation", op.Key, "event", ev.Event, "err", err)
		return
	}
	s.emit(ev)
}

func decisionWord(approve bool) string {
	if approve {
		return "approve"
	}
	return "reject"
}

// credentialLabel names a passkey in the audit without its whole id.
func credentialLabel(id []byte) string {
	sum := sha256.Sum256(id)
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

func stepUpReason(se *StepUpError) string {
	switch se.Code {
	case "missing":
		return "this operation needs your passkey: open its approval page and decide there with your passkey"
	case "no_passkey":
		return "this operation needs a passkey and you have none enrolled: ask an operator to run countersign approvers enroll for you"
	case "sign_count":
		return "your passkey was refused: its signature counter went backwards, which a cloned or replayed passkey does; nothing was recorded and the attempt is in the audit"
	case "challenge":
		return "your passkey signed for another operation or another decision; nothing was recorded and the attempt is in the audit"
	}
	return "your passkey could not be verified (" + se.Code + "); nothing was recorded"
}
