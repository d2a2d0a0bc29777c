// Package passkey is countersign's WebAuthn relying party
// (go-webauthn/webauthn): the options a browser needs to enrol a passkey
// or to sign one decision with it, and the checks of what comes back. It
// keeps nothing; approval.Service stores credentials and moves sign counts
// forward atomically in the store.
//
// Every ceremony requires user verification (a PIN or biometric on the
// authenticator, not just a touch), and every challenge is chosen by the
// service: for a decision it is approval.DecisionChallenge, so an
// assertion signs exactly one (operation, payload hash, decision,
// approver) and nothing else.
package passkey

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/countersign/countersign/approval"
	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
)

var _ approval.Passkeys = (*RP)(nil)

// RP is the relying party of one public URL.
type RP struct {
	wa     *webauthn.WebAuthn
	origin string
}

// New builds the relying party of publicURL: its host is the RP ID, its
// origin the only origin accepted. WebAuthn needs a domain (not an IP
// address) and a secure context: https, or http on localhost. A loopback
// address (development mode's http://127.0.0.1:8080) is served as
// localhost on the same port: Origin says where passkey pages must be
// opened.
func New(publicURL string) (*RP, error) {
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("passkey: public URL %q is not an absolute URL", publicURL)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() && u.Scheme == "http" {
		host = "localhost"
		u.Host = net.JoinHostPort(host, u.Port())
		if u.Port() == "" {
			u.Host = host
		}
	}
	if u.Scheme != "https" && host != "localhost" {
		return nil, fmt.Errorf("passkey: passkeys need an https public URL (or http://localhost), not %s", u.Scheme+"://"+u.Host)
	}
	wa, err := webauthn.New(&webauthn.Config{
		RPID: host, RPDisplayName: "countersign", RPOrigins: []string{u.Scheme + "://" + u.Host},
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey: protocol.ResidentKeyRequirementPreferred, UserVerification: protocol.VerificationRequired,
		},
		AttestationPreference: protocol.PreferNoAttestation,
	})
	if err != nil {
		return nil, fmt.Errorf("passkey: %w (passkeys need a domain name in COUNTERSIGN_PUBLIC_URL, not an IP address)", err)
	}
	return &RP{wa: wa, origin: u.Scheme + "://" + u.Host}, nil
}

// Origin is where passkey pages work: the public URL's origin, or
// http://localhost:port for a loopback address.
func (rp *RP) Origin() string { return rp.origin }

// user is an approver as go-webauthn sees them.
type user struct {
	a     *approval.Approver
	creds []webauthn.Credential
}

// UserHandle is the WebAuthn user id of an approver: stable, and not
// their id in clear.
func UserHandle(approverID string) []byte {
	sum := sha256.Sum256([]byte("countersign-user-v1\n" + approverID))
	return sum[:16]
}

func (u user) WebAuthnID() []byte                         { return UserHandle(u.a.ID) }
func (u user) WebAuthnName() string                       { return u.a.ID }
func (u user) WebAuthnDisplayName() string                { return u.a.DisplayName() }
func (u user) WebAuthnCredentials() []webauthn.Credential { return u.creds }

func newUser(a *approval.Approver, have []approval.PasskeyCredential) user {
	u := user{a: a}
	for _, c := range have {
		u.creds = append(u.creds, webauthn.Credential{
			ID: c.ID, PublicKey: c.PublicKey, AttestationType: c.AttestationType, AttestationFormat: c.AttestationFmt,
			Flags:         webauthn.CredentialFlags{UserPresent: true, UserVerified: c.UserVerified, BackupEligible: c.BackupEligible, BackupState: c.BackupState},
			Authenticator: webauthn.Authenticator{AAGUID: c.AAGUID, SignCount: c.SignCount},
		})
	}
	return u
}

func descriptors(have []approval.PasskeyCredential) []protocol.CredentialDescriptor {
	var out []protocol.CredentialDescriptor
	for _, c := range have {
		out = append(out, protocol.CredentialDescriptor{Type: protocol.PublicKeyCredentialType, CredentialID: c.ID})
	}
	return out
}

func withChallenge(ch []byte) webauthn.RegistrationOption {
	return func(o *protocol.PublicKeyCredentialCreationOptions) error {
		o.Challenge = ch
		return nil
	}
}

func (rp *RP) beginRegistration(a *approval.Approver, challenge []byte, have []approval.PasskeyCredential) (*protocol.CredentialCreation, *webauthn.SessionData, error) {
	opts := []webauthn.RegistrationOption{withChallenge(challenge)}
	if len(have) > 0 {
		opts = append(opts, webauthn.WithExclusions(descriptors(have)))
	}
	return rp.wa.BeginRegistration(newUser(a, have), opts...)
}

// CreationOptions is navigator.credentials.create's options (JSON).
func (rp *RP) CreationOptions(a *approval.Approver, challenge []byte, have []approval.PasskeyCredential) ([]byte, error) {
	creation, _, err := rp.beginRegistration(a, challenge, have)
	if err != nil {
		return nil, fmt.Errorf("passkey: creation options: %w", err)
	}
	return json.Marshal(creation)
}

// Register checks an attestation (the browser's PublicKeyCredential as
// JSON) made over challenge, with user verification.
func (rp *RP) Register(a *approval.Approver, challenge []byte, have []approval.PasskeyCredential, raw []byte) (approval.PasskeyCredential, error) {
	_, session, err := rp.beginRegistration(a, challenge, have)
	if err != nil {
		return approval.PasskeyCredential{}, fmt.Errorf("passkey: registration: %w", err)
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(raw)
	if err != nil {
		return approval.PasskeyCredential{}, refused("invalid", "the passkey response is malformed", err)
	}
	if !sameChallenge(parsed.Response.CollectedClientData.Challenge, challenge) {
		return approval.PasskeyCredential{}, refused("challenge", "the passkey was created for another enrolment", nil)
	}
	if !parsed.Response.AttestationObject.AuthData.Flags.HasUserVerified() {
		return approval.PasskeyCredential{}, refused("user_verification", "the authenticator did not verify the user (PIN or biometric)", nil)
	}
	c, err := rp.wa.CreateCredential(newUser(a, have), *session, parsed)
	if err != nil {
		return approval.PasskeyCredential{}, refused("invalid", "the passkey could not be verified", err)
	}
	return approval.PasskeyCredential{
		ID: c.ID, PublicKey: c.PublicKey, AAGUID: c.Authenticator.AAGUID, SignCount: c.Authenticator.SignCount,
		AttestationType: c.AttestationType, AttestationFmt: c.AttestationFormat,
		BackupEligible: c.Flags.BackupEligible, BackupState: c.Flags.BackupState, UserVerified: c.Flags.UserVerified,
	}, nil
}

func (rp *RP) beginLogin(a *approval.Approver, challenge []byte, creds []approval.PasskeyCredential) (*protocol.CredentialAssertion, *webauthn.SessionData, error) {
	return rp.wa.BeginLogin(newUser(a, creds), webauthn.WithChallenge(challenge),
		webauthn.WithUserVerification(protocol.VerificationRequired))
}

// RequestOptions is navigator.credentials.get's options (JSON).
func (rp *RP) RequestOptions(a *approval.Approver, challenge []byte, creds []approval.PasskeyCredential) ([]byte, error) {
	assertion, _, err := rp.beginLogin(a, challenge, creds)
	if err != nil {
		return nil, fmt.Errorf("passkey: request options: %w", err)
	}
	return json.Marshal(assertion)
}

// Check verifies an assertion (the browser's PublicKeyCredential as JSON)
// over challenge by one of creds, with user verification. The sign count
// it returns is judged by the store.
func (rp *RP) Check(a *approval.Approver, challenge []byte, creds []approval.PasskeyCredential, raw []byte) (approval.PasskeyUse, error) {
	parsed, err := protocol.ParseCredentialRequestResponseBytes(raw)
	if err != nil {
		return approval.PasskeyUse{}, refused("invalid", "the passkey response is malformed", err)
	}
	if !sameChallenge(parsed.Response.CollectedClientData.Challenge, challenge) {
		return approval.PasskeyUse{}, refused("challenge", "the assertion was made for another operation, payload or decision", nil)
	}
	known := false
	for _, c := range creds {
		known = known || bytes.Equal(c.ID, parsed.RawID)
	}
	if !known {
		return approval.PasskeyUse{}, refused("unknown_credential", "the passkey is not enrolled for this approver", nil)
	}
	if !parsed.Response.AuthenticatorData.Flags.HasUserVerified() {
		return approval.PasskeyUse{}, refused("user_verification", "the authenticator did not verify the user (PIN or biometric)", nil)
	}
	_, session, err := rp.beginLogin(a, challenge, creds)
	if err != nil {
		return approval.PasskeyUse{}, fmt.Errorf("passkey: login: %w", err)
	}
	c, err := rp.wa.ValidateLogin(newUser(a, creds), *session, parsed)
	if err != nil {
		return approval.PasskeyUse{}, refused("invalid", "the assertion could not be verified", err)
	}
	return approval.PasskeyUse{CredentialID: c.ID, SignCount: parsed.Response.AuthenticatorData.Counter}, nil
}

// sameChallenge compares the client data's challenge (base64url) with ours.
func sameChallenge(got string, want []byte) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(protocol.URLEncodedBase64(want).String())) == 1
}

// refused is a *approval.StepUpError; cause is kept for logs through
// errors.Unwrap only as text the library wrote (no secrets in it).
func refused(code, reason string, cause error) error {
	e := &approval.StepUpError{Code: code, Reason: reason}
	if cause != nil {
		var pe *protocol.Error
		if errors.As(cause, &pe) && pe.Details != "" {
			e.Reason += ": " + pe.Details
		}
	}
	return e
}
