package faketeams

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Keys are generated once per test process: RSA key generation is slow,
// and each test gets its own server (and kids) anyway.
var (
	keysOnce sync.Once
	keyPool  []*rsa.PrivateKey
)

func poolKey(i int) *rsa.PrivateKey {
	keysOnce.Do(func() {
		for range 4 {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			keyPool = append(keyPool, k)
		}
	})
	return keyPool[i%len(keyPool)]
}

// signingKey is one RS256 key with its kid.
type signingKey struct {
	kid string
	key *rsa.PrivateKey
}

func (k signingKey) sign(claims ...any) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: k.key, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		panic(err)
	}
	b := jwt.Signed(sig)
	for _, c := range claims {
		b = b.Claims(c)
	}
	tok, err := b.Serialize()
	if err != nil {
		panic(err)
	}
	return tok
}

// public is the key as a JWKS entry, with Bot Framework's endorsements
// (the channels the key may sign for).
func (k signingKey) public(endorsements []string) map[string]any {
	raw, err := jose.JSONWebKey{Key: &k.key.PublicKey, KeyID: k.kid, Algorithm: "RS256", Use: "sig"}.MarshalJSON()
	if err != nil {
		panic(err)
	}
	m := map[string]any{}
	if err := jsonUnmarshal(raw, &m); err != nil {
		panic(err)
	}
	if endorsements != nil {
		m["endorsements"] = endorsements
	}
	return m
}

// TokenClaims are the claims of a token the Bot Framework sends with each
// activity; tests change them to make bad tokens.
type TokenClaims struct {
	Issuer     string
	Audience   string
	ServiceURL string
	IssuedAt   time.Time
	Expiry     time.Time
	// NoExpiry leaves exp out.
	NoExpiry bool
}

func (c TokenClaims) claims() (jwt.Claims, map[string]any) {
	std := jwt.Claims{Issuer: c.Issuer, Audience: jwt.Audience{c.Audience}, IssuedAt: jwt.NewNumericDate(c.IssuedAt),
		NotBefore: jwt.NewNumericDate(c.IssuedAt)}
	if !c.NoExpiry {
		std.Expiry = jwt.NewNumericDate(c.Expiry)
	}
	return std, map[string]any{"serviceurl": c.ServiceURL}
}

// forged is a token a Bot Framework key never signed: alg none (no
// signature), or HS256 keyed with the channel key's public modulus (the
// algorithm-confusion attack on RS256 verifiers).
func forged(alg string, claims ...any) string {
	merged := map[string]any{}
	for _, c := range claims {
		raw, _ := json.Marshal(c)
		_ = json.Unmarshal(raw, &merged)
	}
	hdr, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT", "kid": "forged"})
	body, _ := json.Marshal(merged)
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(hdr) + "." + enc.EncodeToString(body)
	if alg == "none" {
		return signing + "."
	}
	mac := hmac.New(sha256.New, poolKey(0).PublicKey.N.Bytes())
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}
