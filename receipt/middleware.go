package receipt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Header is the request header that carries a receipt.
const Header = "Countersign-Receipt"

// DefaultMaxBody bounds the request body Middleware reads to hash it.
const DefaultMaxBody = 1 << 20

// Config configures Middleware.
type Config struct {
	// Keys are countersign's public keys: NewRemoteKeys(".../.well-known/jwks.json"),
	// or a JWKS file (LoadJWKS). Required.
	Keys KeySource
	// Audience is this target's name in countersign's policy file
	// (targets: - name: …). Required.
	Audience string
	// Issuer, when set, is countersign's public URL; receipts from another
	// issuer are refused.
	Issuer string
	// Replay remembers used receipts (default: NewMemoryReplayCache(0, Now)).
	// Several replicas of a target need a shared one.
	Replay ReplayCache
	// BaseURL, when set, is this target's URL as countersign writes to it
	// (its base_url up to the path the target sees, e.g.
	// "https://calendar.example/api" behind a proxy that strips /api):
	// the URL of a request is BaseURL + its path and query. Default: the
	// request's own scheme, Host header, path and query.
	BaseURL string
	// Methods that need a receipt (default POST, PUT, PATCH, DELETE; reads
	// such as countersign's state GET pass).
	Methods []string
	// MaxBody bounds the body read to hash it (default DefaultMaxBody);
	// larger bodies are refused with 413.
	MaxBody int64
	// Leeway is the clock skew allowed (default DefaultLeeway).
	Leeway time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

type claimsKey struct{}

// FromContext returns the verified claims of the receipt that let the
// request through, or nil.
func FromContext(ctx context.Context) *Claims {
	c, _ := ctx.Value(claimsKey{}).(*Claims)
	return c
}

// Middleware returns net/http middleware that lets a write through only
// with a valid receipt: present in the Countersign-Receipt header, signed
// by a published key, unexpired, for this audience (and issuer), covering
// this request's method, URL, body SHA-256 and If-Match, and not used
// before. Anything else is answered 401 with a plain-text reason (503 when
// keys or the replay cache cannot be consulted, 413 for a body over
// MaxBody), and the handler is not called. The handler reads the body as
// it arrived, and the claims with FromContext.
func Middleware(cfg Config) (func(http.Handler) http.Handler, error) {
	if cfg.Keys == nil {
		return nil, errors.New("receipt: Middleware needs Keys")
	}
	if cfg.Audience == "" {
		return nil, errors.New("receipt: Middleware needs the target's Audience")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Replay == nil {
		cfg.Replay = NewMemoryReplayCache(0, cfg.Now)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = DefaultLeeway
	}
	if len(cfg.Methods) == 0 {
		cfg.Methods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !slices.Contains(cfg.Methods, r.Method) {
				next.ServeHTTP(w, r)
				return
			}
			c, status, err := cfg.check(r)
			if err != nil {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.Header().Set("Cache-Control", "no-store")
				if status == http.StatusUnauthorized {
					w.Header().Set("WWW-Authenticate", `Countersign-Receipt error="`+string(ReasonOf(err))+`"`)
				}
				w.WriteHeader(status)
				fmt.Fprintf(w, "countersign receipt refused: %s\n", message(err))
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), claimsKey{}, c)))
		})
	}, nil
}

// check verifies the receipt of r, restores r's body, and spends the
// receipt. It returns the status to answer on error.
func (cfg *Config) check(r *http.Request) (*Claims, int, error) {
	tokens := r.Header.Values(Header)
	if len(tokens) > 1 {
		return nil, http.StatusUnauthorized, refuse(ReasonMalformed, "more than one %s header", Header)
	}
	if len(tokens) == 0 || strings.TrimSpace(tokens[0]) == "" {
		return nil, http.StatusUnauthorized, refuse(ReasonMissing, "this write needs a %s header from countersign", Header)
	}
	now := cfg.Now()
	expect := Expect{Audience: cfg.Audience, Issuer: cfg.Issuer, Now: now, Leeway: cfg.Leeway}
	// The signature first: without a valid receipt the body is not read.
	c, err := Verify(r.Context(), tokens[0], cfg.Keys, expect)
	if err != nil {
		return nil, statusOf(err), err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, cfg.MaxBody+1))
	_ = r.Body.Close()
	if err != nil {
		return nil, http.StatusBadRequest, refuse(ReasonMalformed, "the body could not be read")
	}
	if int64(len(body)) > cfg.MaxBody {
		return nil, http.StatusRequestEntityTooLarge, refuse(ReasonNotCovered, "the body is larger than %d bytes", cfg.MaxBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req := Request{Method: r.Method, URL: cfg.requestURL(r), BodySHA256: BodySHA256(body),
		IfMatch: r.Header.Get("If-Match"), CheckIfMatch: true}
	if err := Covers(c, req); err != nil {
		return nil, http.StatusUnauthorized, err
	}
	// Last: a receipt is spent only by the request it covers.
	fresh, err := cfg.Replay.Use(r.Context(), c.ID, time.Unix(c.Expires, 0).Add(cfg.Leeway))
	switch {
	case err != nil:
		return nil, http.StatusServiceUnavailable, &Error{Reason: ReasonUnavailable, Msg: "the replay cache could not be consulted", Err: err}
	case !fresh:
		return nil, http.StatusUnauthorized, refuse(ReasonReplayed, "receipt %s was already used", clip(c.ID))
	}
	return c, 0, nil
}

// requestURL is the URL of r as countersign wrote it.
func (cfg *Config) requestURL(r *http.Request) string {
	pq := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		pq += "?" + r.URL.RawQuery
	}
	if cfg.BaseURL != "" {
		return cfg.BaseURL + pq
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + pq
}

func statusOf(err error) int {
	if ReasonOf(err) == ReasonUnavailable {
		return http.StatusServiceUnavailable
	}
	return http.StatusUnauthorized
}

// message is the text sent back: the reason and why, never a cause from
// inside (a key fetch error stays in the error for the caller's logs).
func message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return string(e.Reason) + ": " + e.Msg
	}
	return "internal error"
}
