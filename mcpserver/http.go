package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/approval/jsonx"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/gateway"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// HTTPOptions configure NewHTTPHandler. The zero value is fine.
type HTTPOptions struct {
	Options
	// MaxBodyBytes caps a request body (default 1 MiB; countersign serve's
	// own body limit applies first).
	MaxBodyBytes int64
	// OnPrincipal, when set, is told which principal each request
	// authenticated as (the access log).
	OnPrincipal func(ctx context.Context, principal string)
	// ResourceURL is the public URL of this endpoint (https://host/mcp).
	// When set, a refused request's WWW-Authenticate names its protected
	// resource metadata (RFC 9728), which ResourceMetadata serves.
	ResourceURL string
	// Retention is how long a finished operation stays readable: a task's
	// time to live is its approval window plus this (default 7 days).
	Retention time.Duration
	// Elicitation, when set, asks the principal's own human to open the
	// inbox page of a sent operation where the client can open URLs
	// (SPEC §13); set it only where sign-in is configured.
	Elicitation *Elicitation
	// Gateway, when set, serves the upstream MCP servers' tools (SPEC §12).
	Gateway *gateway.Gateway
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
//
// In front of the SDK's handler sits the task layer (tasks.go): MCP tasks
// and URL elicitation at the JSON-RPC level, answered from the operation
// in the store, so they stay stateless too.
func NewHTTPHandler(svc *approval.Service, opts *HTTPOptions) http.Handler {
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.Actions == nil {
		o.Actions = append([]string{}, svc.ActionNames()...) // list only the tools that can run here
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tasks := &taskLayer{retention: o.Retention, elicit: newElicitor(o.Elicitation), log: log}
	srv := NewServerFunc(func(_ context.Context, req *mcp.CallToolRequest) (Backend, error) {
		p := principalOf(req)
		if p == nil {
			return nil, approval.Errorf(approval.CodeUnauthenticated, "missing API key: send Authorization: Bearer <api key>")
		}
		return &Local{Service: svc, Principal: p, Gateway: o.Gateway}, nil
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
			unauthorized(w, err, r.Header.Get("Authorization") != "", o.ResourceURL)
			return
		}
		if o.OnPrincipal != nil {
			o.OnPrincipal(r.Context(), p.ID)
		}
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		if r.Method != http.MethodPost {
			withToken.ServeHTTP(w, r)
			return
		}
		body, ok := oneMessage(w, r, o.MaxBodyBytes)
		if !ok {
			return
		}
		ex := tasks.handle(&Local{Service: svc, Principal: p, Gateway: o.Gateway}, p, body, r.Header.Get("Mcp-Protocol-Version"))
		if ex.answer != nil {
			if out := ex.answer(r.Context()); out != nil {
				writeRPC(w, out)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(ex.forward))
		r.ContentLength = int64(len(ex.forward))
		if ex.rewrite == nil {
			withToken.ServeHTTP(w, r)
			return
		}
		rec := &recorder{header: http.Header{}}
		withToken.ServeHTTP(rec, r)
		out := rec.body.Bytes()
		var resp rpcMsg
		if rec.code() == http.StatusOK && strings.HasPrefix(rec.header.Get("Content-Type"), "application/json") &&
			json.Unmarshal(out, &resp) == nil {
			if b, err := jsonx.Marshal(ex.rewrite(resp)); err == nil {
				out = b
			}
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.code())
		_, _ = w.Write(out)
	})
}

// writeRPC answers a JSON-RPC request that the task layer answered itself.
func writeRPC(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// recorder keeps the SDK's response so the task layer can rewrite it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}
func (r *recorder) Flush() {}
func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// oneMessage reads the body of an authenticated POST (the key is checked
// before any byte of it is read) and refuses a JSON-RPC batch: one HTTP
// request is one call, so what one request can make countersign store is
// what one call can (SPEC §3 guarantee 10), whatever a batch would hold.
// MCP itself dropped batches in protocol 2025-06-18; the SDK still takes
// them from clients that announce an older version or none.
func oneMessage(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return nil, false
		}
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return nil, false
	}
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		rpcError(w, -32600, "JSON-RPC batches are not accepted: send one request per HTTP request")
		return nil, false
	}
	return body, true
}

// rpcError answers 400 with a JSON-RPC error that answers no request.
func rpcError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusBadRequest)
	body, _ := jsonx.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg}})
	_, _ = w.Write(body)
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

// unauthorized answers 401 with the contract's error body, and a
// challenge that tells an MCP client what it needs: a bearer API key (RFC
// 6750: invalid_token when the one sent is not known), and where the
// protected resource metadata says so (RFC 9728), naming no authorization
// server, so that a client does not go looking for an OAuth flow that does
// not exist.
func unauthorized(w http.ResponseWriter, err error, sent bool, resource string) {
	var e *approval.Error
	if !errors.As(err, &e) {
		e = approval.Errorf(approval.CodeUnauthenticated, "unknown API key")
	}
	challenge := `Bearer realm="countersign"`
	if sent {
		challenge += `, error="invalid_token"`
	}
	challenge += `, error_description="` + apiKeyRequired + `"`
	if resource != "" {
		challenge += `, resource_metadata="` + MetadataURL(resource) + `"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	body, _ := jsonx.Marshal(ErrorContent{Error: e})
	_, _ = w.Write(body)
}

// apiKeyRequired is what a refused client is told, in the challenge and
// in the metadata.
const apiKeyRequired = "this MCP server takes a countersign API key, not OAuth: send Authorization: Bearer <api key> (an operator issues keys with countersign keygen)"

// MetadataURL is where the protected resource metadata of resource is
// (RFC 9728 §3.1: the well-known path goes between host and path).
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	u.Path = "/.well-known/oauth-protected-resource" + strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

// ResourceMetadata serves the protected resource metadata (RFC 9728) of
// the MCP endpoint at resource: bearer tokens in the Authorization header,
// and no authorization server, because the token is an API key that an
// operator issues (countersign keygen); there is no OAuth flow to start.
func ResourceMetadata(resource, docs string) http.Handler {
	return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "countersign MCP server (" + apiKeyRequired + ")",
		ResourceDocumentation:  docs,
	})
}
