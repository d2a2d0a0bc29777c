package receipt

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	jose "github.com/go-jose/go-jose/v4"
)

// Bounds on what a key set may cost to read.
const (
	// MaxJWKSBytes bounds a JWKS document (file or URL).
	MaxJWKSBytes = 64 << 10
	// MaxKeys bounds the keys of one JWKS.
	MaxKeys = 100
)

// KeySource finds the public key of a key id. Key returns ErrUnknownKey
// when it has no such key, another error when it cannot tell now.
type KeySource interface {
	Key(ctx context.Context, kid string) (ed25519.PublicKey, error)
}

// ErrUnknownKey is returned for a key id a KeySource does not have.
var ErrUnknownKey = errors.New("receipt: no key with this key id")

// JWKS is a fixed set of Ed25519 public keys by key id. It is a KeySource.
type JWKS struct {
	keys map[string]ed25519.PublicKey
	ids  []string
}

var _ KeySource = (*JWKS)(nil)

// ParseJWKS reads a JSON Web Key Set. Keys other than Ed25519 signing keys
// (other kty or crv, use "enc") are ignored; a key set with a private key,
// a malformed key, an Ed25519 key without kid, a repeated kid, or more
// than MaxKeys keys is refused, as is one with no Ed25519 key at all.
func ParseJWKS(b []byte) (*JWKS, error) {
	if len(b) > MaxJWKSBytes {
		return nil, fmt.Errorf("receipt: JWKS is larger than %d bytes", MaxJWKSBytes)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, errors.New("receipt: JWKS is not a JSON object with \"keys\"")
	}
	if len(doc.Keys) > MaxKeys {
		return nil, fmt.Errorf("receipt: JWKS has %d keys; at most %d are read", len(doc.Keys), MaxKeys)
	}
	set := &JWKS{keys: map[string]ed25519.PublicKey{}}
	for i, raw := range doc.Keys {
		var head struct {
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			Use string `json:"use"`
			Alg string `json:"alg"`
			Kid string `json:"kid"`
			D   any    `json:"d"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("receipt: JWKS key %d is not a JSON object", i)
		}
		if head.D != nil {
			return nil, fmt.Errorf("receipt: JWKS key %d holds a private key; publish only public keys", i)
		}
		if head.Kty != "OKP" || head.Crv != "Ed25519" || head.Use == "enc" || (head.Alg != "" && head.Alg != string(jose.EdDSA)) {
			continue
		}
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("receipt: JWKS key %d (kid %q) is malformed", i, head.Kid)
		}
		pub, ok := k.Key.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("receipt: JWKS key %d (kid %q) is not an Ed25519 public key", i, head.Kid)
		}
		if k.KeyID == "" {
			return nil, fmt.Errorf("receipt: JWKS key %d has no kid", i)
		}
		if _, dup := set.keys[k.KeyID]; dup {
			return nil, fmt.Errorf("receipt: JWKS has two keys with kid %q", k.KeyID)
		}
		set.keys[k.KeyID] = pub
		set.ids = append(set.ids, k.KeyID)
	}
	if len(set.keys) == 0 {
		return nil, errors.New("receipt: JWKS has no Ed25519 signing key")
	}
	return set, nil
}

// ReadJWKS reads a JWKS from r, at most MaxJWKSBytes.
func ReadJWKS(r io.Reader) (*JWKS, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("receipt: read JWKS: %w", err)
	}
	if len(b) > MaxJWKSBytes {
		return nil, fmt.Errorf("receipt: JWKS is larger than %d bytes", MaxJWKSBytes)
	}
	return ParseJWKS(bytes.TrimSpace(b))
}

// LoadJWKS reads a JWKS file.
func LoadJWKS(path string) (*JWKS, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	defer f.Close()
	return ReadJWKS(f)
}

// Key implements KeySource.
func (s *JWKS) Key(_ context.Context, kid string) (ed25519.PublicKey, error) {
	if k, ok := s.keys[kid]; ok {
		return k, nil
	}
	return nil, ErrUnknownKey
}

// IDs lists the key ids, in the set's order.
func (s *JWKS) IDs() []string { return append([]string(nil), s.ids...) }
