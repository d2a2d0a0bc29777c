// Package webauthntest is a software passkey for tests: a real P-256 key
// that makes real WebAuthn registrations ("none" attestation) and
// assertions, byte for byte as a browser hands them to the relying party
// (PublicKeyCredential as JSON, base64url fields). Tests use it where a
// browser is not the point (the service's refusals); the browser tests use
// Chromium's virtual authenticator.
package webauthntest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"

	"github.com/fxamacker/cbor/v2"
)

// Authenticator is one passkey of one relying party.
type Authenticator struct {
	RPID   string
	Origin string
	// Count is the signature counter; each assertion adds one first.
	Count uint32
	// NoUV makes the authenticator skip user verification (touch only).
	NoUV   bool
	ID     []byte
	key    *ecdsa.PrivateKey
	handle []byte
}

// New makes a passkey for the relying party rpID at origin.
func New(rpID, origin string) *Authenticator {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	return &Authenticator{RPID: rpID, Origin: origin, ID: id, key: key}
}

var b64 = base64.RawURLEncoding

func (a *Authenticator) flags(extra byte) byte {
	f := byte(0x01) | extra // UP
	if !a.NoUV {
		f |= 0x04 // UV
	}
	return f
}

func (a *Authenticator) authData(flags byte, attested []byte) []byte {
	rp := sha256.Sum256([]byte(a.RPID))
	out := append([]byte{}, rp[:]...)
	out = append(out, flags)
	out = binary.BigEndian.AppendUint32(out, a.Count)
	return append(out, attested...)
}

func clientData(typ string, challenge []byte, origin string) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": b64.EncodeToString(challenge), "origin": origin, "crossOrigin": false})
	return b
}

// Create registers the passkey for the user handle over challenge and
// returns the browser's attestation JSON.
func (a *Authenticator) Create(userHandle, challenge []byte) []byte {
	a.handle = userHandle
	x, y := a.key.X.FillBytes(make([]byte, 32)), a.key.Y.FillBytes(make([]byte, 32))
	cose, err := cbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: x, -3: y})
	if err != nil {
		panic(err)
	}
	attested := make([]byte, 16) // AAGUID zero
	attested = binary.BigEndian.AppendUint16(attested, uint16(len(a.ID)))
	attested = append(append(attested, a.ID...), cose...)
	obj, err := cbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": a.authData(a.flags(0x40), attested)})
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(map[string]any{
		"id": b64.EncodeToString(a.ID), "rawId": b64.EncodeToString(a.ID), "type": "public-key",
		"response": map[string]any{
			"clientDataJSON":    b64.EncodeToString(clientData("webauthn.create", challenge, a.Origin)),
			"attestationObject": b64.EncodeToString(obj),
		},
		"clientExtensionResults": map[string]any{},
	})
	return out
}

// Get signs an assertion over challenge and returns the browser's
// assertion JSON. The counter moves forward by one first.
func (a *Authenticator) Get(challenge []byte) []byte {
	a.Count++
	return a.Sign(challenge)
}

// Sign is Get without moving the counter (a replay, or a clone).
func (a *Authenticator) Sign(challenge []byte) []byte {
	cd := clientData("webauthn.get", challenge, a.Origin)
	ad := a.authData(a.flags(0), nil)
	h := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte{}, ad...), h[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, a.key, digest[:])
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(map[string]any{
		"id": b64.EncodeToString(a.ID), "rawId": b64.EncodeToString(a.ID), "type": "public-key",
		"response": map[string]any{
			"clientDataJSON":    b64.EncodeToString(cd),
			"authenticatorData": b64.EncodeToString(ad),
			"signature":         b64.EncodeToString(sig),
			"userHandle":        b64.EncodeToString(a.handle),
		},
		"clientExtensionResults": map[string]any{},
	})
	return out
}
