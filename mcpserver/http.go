package mcpserver

import (
	"context"
	"errors"
	"github.com/countersign/countersign/internal/jsonx"
	"log/slog"
	"net/http"
	"strings"

	"github.com/countersign/countersign/approval"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configure NewHTTPHandler. The zero value is fine.
type HTTPOptions struct {
	Options
	// Limit, when set, is called before every tool call with the caller's
	// principal (see Local.Limit).
	Limit func(ctx context.Context, p *approval.Principal) error
	// MaxBodyBytes caps a request body (default 1 MiB; countersign serve's
	// own body limit applies first).
	MaxBodyBytes int64
}

// NewHTTPHandler serves MCP over streamable HTTP for the principals of svc:
// every request needs Authorization: Bearer <api key> (the same keys,
// principals and scopes as the REST API), and a missing or unknown key gets
// 401 with WWW-Authenticate before any MCP processing.
//
// It is stateless (no Mcp-Session-Id, GET and DELETE answer 405) with JSON
// responses, so any replica can answer any request without sticky
// sessions, and it works behind fiber's adaptor, which buffers responses.
// DNS-rebinding protection is left to the bearer key: behind the adaptor
// the SDK cannot see the local address, and a browser tricked into calling
// it cannot send the key.
func NewHTTPHandler(svc *approval.Service, opts *HTTPOptions) http.Handler {
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 1 << 20
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := NewServerFunc(func(_ context.Context, req *mcp.CallToolRequest) (Backend, error) {
		p := principalOf(req)
		if p == nil {
			return nil, approval.Errorf(approval.CodeUnauthenticated, "missing API key: send Authorization: Bearer <api key>")
		}
		return &Local{Service: svc, Principal: p, Limit: o.Limit}, nil
	}, &o.Options)
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: log, MaxRequestBodyBytes: o.MaxBodyBytes,
		DisableLocalhostProtection: true,
	})
	// RequireBearerToken is what puts TokenInfo where tool handlers find it
	// (req.Extra.TokenInfo); the key itself was checked just before.
	withToken := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := r.Context().Value(principalKey{}).(*approval.Principal)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.ID, Scopes: p.Scopes, Extra: map[string]any{principalExtra: p}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := bearer(r.Header.Get("Authorization"))
		var p *approval.Principal
		if err == nil {
			p, err = svc.Authenticate(key)
		}
		if err != nil {
			unauthorized(w, err)
			return
		}
		withToken.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

type principalKey struct{}

const principalExtra = "countersign.principal"

// principalOf is the principal the HTTP layer authenticated for this call.
func principalOf(req *mcp.CallToolRequest) *approval.Principal {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil
	}
	p, _ := req.Extra.TokenInfo.Extra[principalExtra].(*approval.Principal)
	return p
}

func bearer(h string) (string, error) {
	scheme, key, ok := strings.Cut(strings.TrimSpace(h), " ")
	if h == "" {
		return "", approval.Errorf(approval.CodeUnauthenticated, "missing API key: send Authorization: Bearer <api key>")
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", approval.Errorf(approval.CodeUnauthenticated, "use Authorization: Bearer <api key>")
	}
	return strings.TrimSpace(key), nil
}

// unauthorized answers 401 with the contract's error body.
func unauthorized(w http.ResponseWriter, err error) {
	var e *approval.Error
	if !errors.As(err, &e) {
		e = approval.Errorf(approval.CodeUnauthenticated, "unknown API key")
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="countersign"`)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	body, _ := jsonx.Marshal(ErrorContent{Error: e})
	_, _ = w.Write(body)
}
