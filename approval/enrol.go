package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"
)

// Passkey enrolment (SPEC §11). An operator asks for it (countersign
// approvers enroll ID, through the admin API); the service mints a
// single-use enrolment link and sends it to the approver through their
// channels (email, console), never to the operator. Opening the link
// shows a page and changes nothing; registering a passkey there uses the
// link up and stores the passkey, in one step.

// EnrolTTL is how long an enrolment link lives.
const EnrolTTL = 24 * time.Hour

// EnrolmentNotice is one enrolment link to deliver. Link is a capability:
// never log it.
type EnrolmentNotice struct {
	Approver  *Approver
	Link      string
	ExpiresAt time.Time
}

// Enroller is implemented by channels that can carry an enrolment link to
// an approver (email, console). It returns where it went.
type Enroller interface {
	Enrol(ctx context.Context, n EnrolmentNotice) (to string, err error)
}

// EnrolResult is what the operator learns: never the link.
type EnrolResult struct {
	Approver  string     `json:"approver"`
	ExpiresAt time.Time  `json:"expires_at"`
	Sent      []Notified `json:"sent"`
	// Passkeys is how many passkeys the approver has already.
	Passkeys int `json:"passkeys"`
}

// enrolChannels are the channels that can carry an enrolment link, in
// the order they are tried.
var enrolChannels = []string{"email", "console"}

// StartEnrolment sends approverID a new single-use enrolment link through
// each of their channels that can carry one. Returns not_found (no such
// approver), invalid_state (no channel reaches them), unavailable.
func (s *Service) StartEnrolment(ctx context.Context, o *Operator, approverID string) (*EnrolResult, error) {
	a := s.policy.Approver(approverID)
	if a == nil {
		return nil, Errorf(CodeNotFound, "no approver %q in the policy file", approverID)
	}
	if s.passkeys == nil || s.passkeyStore == nil {
		return nil, Errorf(CodeInvalidState, "passkeys are not available on this service")
	}
	channels := s.approverChannels(a)
	if len(channels) == 0 {
		return nil, Errorf(CodeInvalidState, "approver %s has no channel that can carry an enrolment link (email with an address, or console)", a.ID).
			WithDetails(map[string]any{"channels": enrolChannels})
	}
	have, err := s.passkeyStore.PasskeyCredentials(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	n := base64.RawURLEncoding.EncodeToString(nonce)
	if err := s.passkeyStore.AddEnrolment(ctx, a.ID, NonceHash(n), EnrolTTL); err != nil {
		return nil, err
	}
	exp := s.now().UTC().Add(EnrolTTL).Truncate(time.Second)
	link := s.passkeys.Origin() + "/enroll/" + enrolToken(a.ID, n)
	res := &EnrolResult{Approver: a.ID, ExpiresAt: exp, Sent: []Notified{}, Passkeys: len(have)}
	var failed []string
	for _, ch := range channels {
		en, _ := optional[Enroller](s.notifiers[ch])
		to, err := en.Enrol(ctx, EnrolmentNotice{Approver: a, Link: link, ExpiresAt: exp})
		if err != nil {
			s.log.Warn("enrolment link not delivered", "approver", a.ID, "channel", ch, "err", err)
			failed = append(failed, ch)
			continue
		}
		res.Sent = append(res.Sent, Notified{Channel: ch, To: to, At: s.now().UTC()})
	}
	if len(res.Sent) == 0 {
		return nil, Errorf(CodeUnavailable, "the enrolment link could not be delivered (%s); try again", strings.Join(failed, ", "))
	}
	s.log.Info("passkey enrolment started", "approver", a.ID, "operator", o.ID, "channels", len(res.Sent))
	return res, nil
}

// approverChannels are the enrolment channels of the routes that reach a.
func (s *Service) approverChannels(a *Approver) []string {
	var used []string
	for _, r := range s.policy.Routes {
		if !slices.Contains(r.ApproverIDs, a.ID) && !overlaps(a.Groups, r.ApproverGroups) {
			continue
		}
		for _, spec := range r.Notify {
			ch, _, _ := strings.Cut(spec, ":")
			used = append(used, ch)
		}
	}
	var out []string
	for _, ch := range enrolChannels {
		if _, ok := optional[Enroller](s.notifiers[ch]); !ok || !slices.Contains(used, ch) {
			continue
		}
		if ch == "email" && a.Email == "" {
			continue
		}
		out = append(out, ch)
	}
	return out
}

// enrolToken is "<base64url(approver)>.<nonce>".
func enrolToken(approver, nonce string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(approver)) + "." + nonce
}

func parseEnrolToken(token string) (approver, nonce string, ok bool) {
	if len(token) > 200 {
		return "", "", false
	}
	a, n, found := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.Strict().DecodeString(a)
	if !found || err != nil || len(raw) == 0 || len(n) != 22 {
		return "", "", false
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString(n); err != nil {
		return "", "", false
	}
	return string(raw), n, true
}

// enrolChallenge is the registration challenge of one enrolment link.
func enrolChallenge(nonceHash string) []byte {
	sum := sha256.Sum256([]byte("countersign-enrol-v1\n" + nonceHash))
	return sum[:]
}

// EnrolView is what the enrolment page shows.
type EnrolView struct {
	OK       bool // the link is live
	Approver *Approver
	// Options is navigator.credentials.create's options (JSON).
	Options []byte
	// Passkeys is how many passkeys the approver has.
	Passkeys int
	// Done is set once a passkey was registered with this link.
	Done bool
}

// OpenEnrolment checks an enrolment link without using it (GET, and any
// mail scanner). A link that is not live reads as OK false.
func (s *Service) OpenEnrolment(ctx context.Context, token string) (*EnrolView, error) {
	approver, nonce, ok := parseEnrolToken(token)
	a := s.policy.Approver(approver)
	if !ok || a == nil || s.passkeys == nil || s.passkeyStore == nil {
		return &EnrolView{}, nil
	}
	live, err := s.passkeyStore.Enrolment(ctx, a.ID, NonceHash(nonce))
	if err != nil || !live {
		return &EnrolView{}, err
	}
	have, err := s.passkeyStore.PasskeyCredentials(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	opts, err := s.passkeys.CreationOptions(a, enrolChallenge(NonceHash(nonce)), have)
	if err != nil {
		return nil, err
	}
	return &EnrolView{OK: true, Approver: a, Options: opts, Passkeys: len(have)}, nil
}

// FinishEnrolment registers the passkey a browser created on the
// enrolment page and uses the link up. Returns a *StepUpError when the
// attestation is refused (the link stays live), and a view with OK false
// when the link is not live.
func (s *Service) FinishEnrolment(ctx context.Context, token string, raw []byte) (*EnrolView, error) {
	v, err := s.OpenEnrolment(ctx, token)
	if err != nil || !v.OK {
		return v, err
	}
	if len(raw) == 0 || len(raw) > MaxAssertionBytes {
		return v, &StepUpError{Code: "invalid", Reason: "no passkey came with the form"}
	}
	_, nonce, _ := parseEnrolToken(token)
	have, err := s.passkeyStore.PasskeyCredentials(ctx, v.Approver.ID)
	if err != nil {
		return nil, err
	}
	c, err := s.passkeys.Register(v.Approver, enrolChallenge(NonceHash(nonce)), have, raw)
	if err != nil {
		var se *StepUpError
		if errors.As(err, &se) {
			s.log.Warn("passkey enrolment refused", "approver", v.Approver.ID, "code", se.Code)
		}
		return v, err
	}
	c.Created = s.now().UTC()
	ok, err := s.passkeyStore.Enrol(ctx, v.Approver.ID, NonceHash(nonce), c)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &EnrolView{}, nil
	}
	s.log.Info("passkey enrolled", "approver", v.Approver.ID, "credential", credentialLabel(c.ID))
	return &EnrolView{OK: true, Done: true, Approver: v.Approver, Passkeys: len(have) + 1}, nil
}
