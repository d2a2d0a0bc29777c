package receipt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// MaxTokenBytes bounds a receipt; longer ones are refused unread.
const MaxTokenBytes = 16 << 10

// DefaultLeeway is the clock skew allowed on iat and exp.
const DefaultLeeway = 30 * time.Second

// Reason says why a receipt was refused. The values are stable.
type Reason string

const (
	ReasonMissing       Reason = "missing"        // no receipt
	ReasonMalformed     Reason = "malformed"      // not a compact JWS of a receipt
	ReasonUnknownKey    Reason = "unknown_key"    // signed with a key the JWKS does not have
	ReasonBadSignature  Reason = "bad_signature"  // the signature does not verify
	ReasonExpired       Reason = "expired"        // past exp
	ReasonNotYetValid   Reason = "not_yet_valid"  // iat in the future
	ReasonWrongAudience Reason = "wrong_audience" // for another target
	ReasonWrongIssuer   Reason = "wrong_issuer"   // from another countersign
	ReasonNotCovered    Reason = "not_covered"    // does not cover this request
	ReasonReplayed      Reason = "replayed"       // already used
	ReasonUnavailable   Reason = "unavailable"    // keys or replay cache could not be consulted
)

// Error is a refused receipt. Its message is plain and fit to send back to
// the caller; it never contains the token.
type Error struct {
	Reason Reason
	Msg    string
	Err    error // the cause, for ReasonUnavailable
}

func (e *Error) Error() string { return "receipt " + string(e.Reason) + ": " + e.Msg }
func (e *Error) Unwrap() error { return e.Err }

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Msg: fmt.Sprintf(format, args...)}
}

// ReasonOf returns the reason of a refusal, or "" for nil and other errors.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// Expect is what a receipt must say to be accepted.
type Expect struct {
	// Audience, when set, must be the receipt's aud (the target's name in
	// countersign's policy file, or "email", "slack", "teams").
	Audience string
	// Issuer, when set, must be the receipt's iss (countersign's public URL).
	Issuer string
	// Request, when set, must be the write the receipt's http claim covers.
	Request *Request
	// Now is the time to check exp and iat against (default: time.Now).
	Now time.Time
	// Leeway is the clock skew allowed (default DefaultLeeway; negative: none).
	Leeway time.Duration
}

// Request is a write a receipt should cover.
type Request struct {
	Method string
	URL    string
	// BodySHA256 is the lowercase hex SHA-256 of the body bytes.
	BodySHA256 string
	// IfMatch, when CheckIfMatch is set, must equal the http claim's
	// if_match (both empty when the write had none).
	IfMatch      string
	CheckIfMatch bool
}

// BodySHA256 is the body hash an http claim carries.
func BodySHA256(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

// Verify checks a receipt: its form, its signature against keys, its
// expiry, and what expect asks for. It does not check replays (Middleware
// does, with a ReplayCache). Whitespace in token is ignored (an email
// header may be folded). The error is an *Error.
func Verify(ctx context.Context, token string, keys KeySource, expect Expect) (*Claims, error) {
	c, err := verifySignature(ctx, token, keys)
	if err != nil {
		return nil, err
	}
	if err := expect.check(c); err != nil {
		return c, err
	}
	return c, nil
}

func verifySignature(ctx context.Context, token string, keys KeySource) (*Claims, error) {
	if len(token) > MaxTokenBytes {
		return nil, refuse(ReasonMalformed, "the receipt is larger than %d bytes", MaxTokenBytes)
	}
	payload, err := VerifyJWS(ctx, token, Type, keys)
	if err != nil {
		return nil, err
	}
	var c Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, refuse(ReasonMalformed, "the claims are not a receipt's")
	}
	if c.Issuer == "" || c.ID == "" || c.IssuedAt == 0 || c.Expires == 0 || c.Audience == "" || c.Action == "" || c.PayloadHash == "" {
		return nil, refuse(ReasonMalformed, "a required claim (iss, jti, iat, exp, aud, act, ph) is missing")
	}
	return &c, nil
}

// VerifyJWS checks a compact JWS of type typ signed with EdDSA by a key of
// keys, and returns its payload. Receipts and audit checkpoints share it.
// The error is an *Error.
func VerifyJWS(ctx context.Context, token, typ string, keys KeySource) ([]byte, error) {
	token = strings.Join(strings.Fields(token), "")
	if token == "" {
		return nil, refuse(ReasonMissing, "no receipt")
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, refuse(ReasonMalformed, "not a compact JWS signed with EdDSA")
	}
	if len(jws.Signatures) != 1 {
		return nil, refuse(ReasonMalformed, "exactly one signature is allowed")
	}
	h := jws.Signatures[0].Protected
	if t, _ := h.ExtraHeaders[jose.HeaderType].(string); !strings.EqualFold(t, typ) {
		return nil, refuse(ReasonMalformed, "typ is %q, not %s", clip(t), typ)
	}
	if h.KeyID == "" {
		return nil, refuse(ReasonMalformed, "no kid in the header")
	}
	key, err := keys.Key(ctx, h.KeyID)
	switch {
	case errors.Is(err, ErrUnknownKey):
		return nil, refuse(ReasonUnknownKey, "signed with key %q, which the JWKS does not publish", clip(h.KeyID))
	case err != nil:
		return nil, &Error{Reason: ReasonUnavailable, Msg: "the signing keys could not be read", Err: err}
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, refuse(ReasonBadSignature, "the signature does not verify with key %q", clip(h.KeyID))
	}
	return payload, nil
}

func (e Expect) check(c *Claims) error {
	now := e.Now
	if now.IsZero() {
		now = time.Now()
	}
	leeway := e.Leeway
	switch {
	case leeway == 0:
		leeway = DefaultLeeway
	case leeway < 0:
		leeway = 0
	}
	if exp := time.Unix(c.Expires, 0); now.After(exp.Add(leeway)) {
		return refuse(ReasonExpired, "expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if iat := time.Unix(c.IssuedAt, 0); iat.After(now.Add(leeway)) {
		return refuse(ReasonNotYetValid, "issued in the future (%s)", iat.UTC().Format(time.RFC3339))
	}
	if e.Audience != "" && c.Audience != e.Audience {
		return refuse(ReasonWrongAudience, "for %q, not %q", clip(c.Audience), e.Audience)
	}
	if e.Issuer != "" && strings.TrimRight(c.Issuer, "/") != strings.TrimRight(e.Issuer, "/") {
		return refuse(ReasonWrongIssuer, "issued by %q, not %q", clip(c.Issuer), e.Issuer)
	}
	if e.Request != nil {
		return Covers(c, *e.Request)
	}
	return nil
}

// Covers reports (as a ReasonNotCovered error) whether the http claim of c
// covers req: same method, same URL, same body hash.
func Covers(c *Claims, req Request) error {
	h := c.HTTP
	if h == nil {
		return refuse(ReasonNotCovered, "the receipt is for %s, not an HTTP write", clip(c.Action))
	}
	if !strings.EqualFold(h.Method, req.Method) {
		return refuse(ReasonNotCovered, "the receipt covers %s, not %s", clip(h.Method), clip(req.Method))
	}
	if !sameURL(h.URL, req.URL) {
		return refuse(ReasonNotCovered, "the receipt covers %s, not %s", clip(h.URL), clip(req.URL))
	}
	if !strings.EqualFold(h.BodySHA256, req.BodySHA256) {
		return refuse(ReasonNotCovered, "the body differs from the approved one (SHA-256 %s, approved %s)", clip(req.BodySHA256), clip(h.BodySHA256))
	}
	if req.CheckIfMatch && h.IfMatch != req.IfMatch {
		return refuse(ReasonNotCovered, "If-Match is %q, the receipt covers %q", clip(req.IfMatch), clip(h.IfMatch))
	}
	return nil
}

// sameURL compares scheme and host case-insensitively (default ports
// aside), and the escaped path and the query exactly.
func sameURL(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && hostPort(ua) == hostPort(ub) &&
		ua.EscapedPath() == ub.EscapedPath() && ua.RawQuery == ub.RawQuery
}

func hostPort(u *url.URL) string {
	h, p := strings.ToLower(u.Hostname()), u.Port()
	if p == "" || (p == "443" && strings.EqualFold(u.Scheme, "https")) || (p == "80" && strings.EqualFold(u.Scheme, "http")) {
		return h
	}
	return h + ":" + p
}

// clip shortens a value from the token for a message.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// Peek decodes a receipt WITHOUT verifying it, for display (countersign
// verify shows what a refused receipt claims). Nothing it returns may be
// trusted.
func Peek(token string) (kid string, c *Claims, err error) {
	token = strings.Join(strings.Fields(token), "")
	if len(token) > MaxTokenBytes {
		return "", nil, refuse(ReasonMalformed, "the receipt is larger than %d bytes", MaxTokenBytes)
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil || len(jws.Signatures) != 1 {
		return "", nil, refuse(ReasonMalformed, "not a compact JWS signed with EdDSA")
	}
	c = &Claims{}
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), c); err != nil {
		return jws.Signatures[0].Protected.KeyID, nil, refuse(ReasonMalformed, "the claims are not a receipt's")
	}
	return jws.Signatures[0].Protected.KeyID, c, nil
}
