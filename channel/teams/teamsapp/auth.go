package teamsapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The Bot Framework signs a JWT for every activity it sends to a bot
// (https://learn.microsoft.com/azure/bot-service/rest-api/bot-framework-rest-connector-authentication):
// RS256, with a key from the JWKS that its OpenID metadata names, issued
// by the metadata's issuer, for the bot's app id, current within five
// minutes, and carrying the serviceUrl of the activity. The key may list
// endorsements: the channels it may sign for.

// DefaultOpenIDURL is the Bot Framework's OpenID metadata
// (COUNTERSIGN_TEAMS_OPENID_URL overrides it).
const DefaultOpenIDURL = "https://login.botframework.com/v1/.well-known/openidconfiguration"

const (
	// Skew is the clock difference a token's times are allowed.
	Skew = 5 * time.Minute
	// keysRefresh is how often the keys are read again (Microsoft
	// advises daily); minRefresh bounds unscheduled reads, which an
	// unknown key id triggers, so that forged key ids cannot flood the
	// metadata endpoint.
	keysRefresh = 24 * time.Hour
	minRefresh  = time.Minute
	maxToken    = 8 << 10
	maxDocument = 1 << 20
)

// VerifierConfig builds a Verifier.
type VerifierConfig struct {
	// OpenIDURL is the metadata URL (DefaultOpenIDURL).
	OpenIDURL string
	// AppID is the bot's app id: the audience tokens must be for.
	AppID string
	HTTP  *http.Client
	Now   func() time.Time
}

// Verifier checks Bot Framework tokens.
type Verifier struct {
	cfg VerifierConfig

	mu      sync.Mutex
	issuer  string
	keys    map[string]botKey
	fetched time.Time // when the keys were last read
	tried   time.Time // when a read was last attempted
}

type botKey struct {
	key          *jose.JSONWebKey
	endorsements []string
}

// Identity is what a verified token says.
type Identity struct {
	// ServiceURL is the token's serviceurl claim: the activity must carry
	// the same.
	ServiceURL string
	// Endorsements of the signing key (nil: any channel).
	Endorsements []string
}

// NewVerifier checks cfg.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if cfg.AppID == "" {
		return nil, errors.New("teamsapp: the app id is required")
	}
	if cfg.OpenIDURL == "" {
		cfg.OpenIDURL = DefaultOpenIDURL
	}
	u, err := url.Parse(cfg.OpenIDURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("COUNTERSIGN_TEAMS_OPENID_URL must be an absolute http(s) URL, such as %s", DefaultOpenIDURL)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 5 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Verifier{cfg: cfg}, nil
}

// Verify checks the Authorization header of an activity. Its errors say
// why, and never hold the token.
func (v *Verifier) Verify(ctx context.Context, authorization string) (*Identity, error) {
	raw, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || raw == "" {
		return nil, errors.New("no bearer token")
	}
	if len(raw) > maxToken {
		return nil, errors.New("token too long")
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil || len(tok.Headers) != 1 {
		return nil, errors.New("not an RS256 JWT")
	}
	kid := tok.Headers[0].KeyID
	if kid == "" {
		return nil, errors.New("the token names no key")
	}
	k, issuer, err := v.key(ctx, kid)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	var extra struct {
		ServiceURL string `json:"serviceurl"`
	}
	if err := tok.Claims(k.key.Key, &std, &extra); err != nil {
		return nil, errors.New("bad signature")
	}
	if std.Expiry == nil {
		return nil, errors.New("the token has no expiry")
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{v.cfg.AppID}, Time: v.cfg.Now()}, Skew); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	if extra.ServiceURL == "" {
		return nil, errors.New("the token has no serviceurl")
	}
	return &Identity{ServiceURL: extra.ServiceURL, Endorsements: k.endorsements}, nil
}

// Warm reads the keys now, so that the first click does not wait for them.
func (v *Verifier) Warm(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.tried = v.cfg.Now()
	return v.fetch(ctx)
}

// key returns the key kid and the issuer, reading the keys when they are
// stale or kid is unknown (at most once a minute for the latter).
func (v *Verifier) key(ctx context.Context, kid string) (botKey, string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.cfg.Now()
	k, known := v.keys[kid]
	stale := v.keys == nil || now.Sub(v.fetched) > keysRefresh
	if known && !stale {
		return k, v.issuer, nil
	}
	if v.tried.IsZero() || now.Sub(v.tried) >= minRefresh || stale && now.Sub(v.tried) >= 5*time.Second {
		v.tried = now
		if err := v.fetch(ctx); err != nil && v.keys == nil {
			return botKey{}, "", err
		}
		k, known = v.keys[kid]
	}
	if !known {
		return botKey{}, "", errors.New("the token's key is not one of the Bot Framework's")
	}
	return k, v.issuer, nil
}

// fetch reads the metadata and its JWKS. v.mu is held.
func (v *Verifier) fetch(ctx context.Context) error {
	var meta struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := v.get(ctx, v.cfg.OpenIDURL, &meta); err != nil {
		return fmt.Errorf("openid metadata: %w", err)
	}
	ju, err := url.Parse(meta.JWKSURI)
	base, _ := url.Parse(v.cfg.OpenIDURL)
	if meta.Issuer == "" || err != nil || ju.Host == "" || (ju.Scheme != "https" && !(ju.Scheme == "http" && base.Scheme == "http")) {
		return errors.New("openid metadata: no issuer or no https jwks_uri")
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := v.get(ctx, meta.JWKSURI, &set); err != nil {
		return fmt.Errorf("jwks: %w", err)
	}
	keys := map[string]botKey{}
	for _, raw := range set.Keys {
		var jwk jose.JSONWebKey
		var extra struct {
			Endorsements []string `json:"endorsements"`
		}
		if jwk.UnmarshalJSON(raw) != nil || json.Unmarshal(raw, &extra) != nil || jwk.KeyID == "" || !jwk.Valid() ||
			!jwk.IsPublic() || (jwk.Use != "" && jwk.Use != "sig") {
			continue
		}
		keys[jwk.KeyID] = botKey{key: &jwk, endorsements: extra.Endorsements}
	}
	if len(keys) == 0 {
		return errors.New("jwks: no usable key")
	}
	v.keys, v.issuer, v.fetched = keys, meta.Issuer, v.cfg.Now()
	return nil
}

func (v *Verifier) get(ctx context.Context, u string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := v.cfg.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(out); err != nil {
		return errors.New("not JSON")
	}
	return nil
}
