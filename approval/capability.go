package approval

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A capability link lets one approver decide one operation, through one
// channel, until the approval window ends. The token is
//
//	<kid>.<base64url(op|approver|channel|expiry|nonce)>.<base64url(hmac)>
//
// The HMAC-SHA256 covers the key id, the claims and the operation's payload
// hash, so a link signed for one payload never verifies against another.
// The nonce (128 random bits) is stored only as its SHA-256, bound to the
// approver, so a leaked store does not hand out links.

// LinkKey is one signing key.
type LinkKey struct {
	ID     string
	Secret []byte
}

// Keyring signs with its first key and verifies with any (rotation).
type Keyring struct {
	keys []LinkKey
}

var kidPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// NewKeyring checks the keys: at least one, ids well-formed and unique,
// secrets of at least 32 bytes.
func NewKeyring(keys ...LinkKey) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("link keys: at least one key is required")
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if !kidPattern.MatchString(k.ID) {
			return nil, fmt.Errorf("link keys: key id %q must be 1-32 of [A-Za-z0-9_-]", k.ID)
		}
		if seen[k.ID] {
			return nil, fmt.Errorf("link keys: duplicate key id %q", k.ID)
		}
		if len(k.Secret) < 32 {
			return nil, fmt.Errorf("link keys: key %q is %d bytes, at least 32 are required", k.ID, len(k.Secret))
		}
		seen[k.ID] = true
	}
	return &Keyring{keys: keys}, nil
}

// ParseKeyring reads COUNTERSIGN_LINK_KEYS: "kid:base64key[,kid:base64key…]".
func ParseKeyring(s string) (*Keyring, error) {
	var keys []LinkKey
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		kid, b64, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("link keys: %q is not kid:base64key", redactKeyPart(part))
		}
		secret, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			if secret, err = base64.RawURLEncoding.DecodeString(b64); err != nil {
				return nil, fmt.Errorf("link keys: key %q is not valid base64", kid)
			}
		}
		keys = append(keys, LinkKey{ID: kid, Secret: secret})
	}
	return NewKeyring(keys...)
}

func redactKeyPart(s string) string {
	if len(s) > 4 {
		return s[:4] + "…"
	}
	return "…"
}

// RandomKeyring makes a one-key keyring for development mode.
func RandomKeyring() *Keyring {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		panic(err)
	}
	k, _ := NewKeyring(LinkKey{ID: "dev", Secret: secret})
	return k
}

// LinkClaims are what a link says about itself.
type LinkClaims struct {
	Operation string
	Approver  string
	Channel   string
	Expires   time.Time
	Nonce     string
}

// NonceHash is the stored form of the link's nonce.
func (c LinkClaims) NonceHash() string { return NonceHash(c.Nonce) }

// NonceHash returns the hex SHA-256 of a nonce.
func NonceHash(nonce string) string {
	sum := sha256.Sum256([]byte(nonce))
	return hex.EncodeToString(sum[:])
}

// NewLinkClaims draws a fresh nonce.
func NewLinkClaims(op, approver, channel string, expires time.Time) LinkClaims {
	n := make([]byte, 16)
	if _, err := rand.Read(n); err != nil {
		panic(err)
	}
	return LinkClaims{Operation: op, Approver: approver, Channel: channel, Expires: expires.UTC().Truncate(time.Second),
		Nonce: base64.RawURLEncoding.EncodeToString(n)}
}

// Sign returns the link token for claims bound to payloadHash.
func (k *Keyring) Sign(c LinkClaims, payloadHash string) string {
	key := k.keys[0]
	body := base64.RawURLEncoding.EncodeToString([]byte(strings.Join([]string{
		c.Operation, c.Approver, c.Channel, strconv.FormatInt(c.Expires.Unix(), 10), c.Nonce}, "|")))
	return key.ID + "." + body + "." + base64.RawURLEncoding.EncodeToString(mac(key.Secret, key.ID, body, payloadHash))
}

func mac(secret []byte, kid, body, payloadHash string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("countersign-link-v1\n" + kid + "\n" + body + "\n" + payloadHash))
	return m.Sum(nil)
}

// ErrLinkMalformed means the token is not a link at all, or names an
// unknown key: it is treated as not found.
var ErrLinkMalformed = errors.New("link: malformed")

// ErrLinkSignature means the signature does not verify for this operation.
var ErrLinkSignature = errors.New("link: bad signature")

// ParseLink decodes the claims of a token without verifying it, so the
// caller can load the operation whose payload hash the signature covers.
// Nothing it returns may be trusted before Verify.
func (k *Keyring) ParseLink(token string) (LinkClaims, error) {
	if len(token) > 512 {
		return LinkClaims{}, ErrLinkMalformed
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || k.key(parts[0]) == nil {
		return LinkClaims{}, ErrLinkMalformed
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(parts[1])
	if err != nil {
		return LinkClaims{}, ErrLinkMalformed
	}
	f := strings.Split(string(raw), "|")
	if len(f) != 5 || !ValidOperationKey(f[0]) || f[1] == "" || f[4] == "" {
		return LinkClaims{}, ErrLinkMalformed
	}
	exp, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return LinkClaims{}, ErrLinkMalformed
	}
	return LinkClaims{Operation: f[0], Approver: f[1], Channel: f[2], Expires: time.Unix(exp, 0).UTC(), Nonce: f[4]}, nil
}

// VerifyLink checks the token's signature against the operation's payload
// hash, in constant time.
func (k *Keyring) VerifyLink(token, payloadHash string) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ErrLinkMalformed
	}
	key := k.key(parts[0])
	if key == nil {
		return ErrLinkMalformed
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(parts[2]) // one encoding per signature
	if err != nil {
		return ErrLinkSignature
	}
	if !hmac.Equal(sig, mac(key.Secret, key.ID, parts[1], payloadHash)) {
		return ErrLinkSignature
	}
	return nil
}

func (k *Keyring) key(id string) *LinkKey {
	for i := range k.keys {
		if k.keys[i].ID == id {
			return &k.keys[i]
		}
	}
	return nil
}

// MAC derives a keyed hash for another purpose (CSRF tokens) from the
// signing key, so every replica computes the same value without shared state.
func (k *Keyring) MAC(purpose string, parts ...string) string {
	m := hmac.New(sha256.New, k.keys[0].Secret)
	m.Write([]byte("countersign-" + purpose + "-v1"))
	for _, p := range parts {
		m.Write([]byte{'\n'})
		m.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Capability is the stored record of one issued link: keyed by nonce hash.
type Capability struct {
	Approver string    `json:"approver"`
	Channel  string    `json:"channel"`
	Expires  time.Time `json:"expires"`
	// Revoked: a newer link to the same approver through the same channel
	// (a reminder's) replaced it.
	Revoked bool `json:"revoked,omitempty"`
}
