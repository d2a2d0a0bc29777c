// Package web is countersign's HTTP edge (fiber): the agents' REST API,
// the approval pages humans open from their links, the development
// mailbox, health and metrics. It translates approval.Error codes to HTTP
// statuses and never shows internal error text.
package web

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/countersign/countersign/approval/jsonx"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/prom"
	"github.com/countersign/countersign/internal/redact"
	"github.com/countersign/countersign/templates"
	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	htmltemplate "html/template"
)

// Limiter counts attempts against limits shared by all replicas.
type Limiter interface {
	Allow(ctx context.Context, bucket string, limit int, window time.Duration) (bool, time.Duration, error)
	Count(ctx context.Context, bucket string) (int, time.Duration, error)
}

// Mount adds a handler that another adapter provides (Slack, MCP): a
// fiber handler, or a net/http one (HTTP), which gets the request's trace
// and access-log context but not its store deadline (it sets its own).
type Mount struct {
	Method  string // "" for all methods
	Path    string
	Handler fiber.Handler
	HTTP    http.Handler
	// BodyLimit is the most of a body an HTTP handler can read (default
	// the server's BodyLimit); a fiber Handler reads its body itself,
	// through httpbody.Read, after checking its headers.
	BodyLimit int
}

// Config builds the HTTP edge.
type Config struct {
	Service *approval.Service
	Limiter Limiter
	Ready   func(context.Context) error
	// Upstreams, when set, reports the gateway's upstream MCP servers in
	// /readyz's body (they never make it unready).
	Upstreams func() any
	PublicURL string
	Registry  *prom.Registry
	Logger    *slog.Logger
	// JWKS is the receipt keys' JSON Web Key Set, served at
	// /.well-known/jwks.json (none: 404).
	JWKS []byte
	// AuditHead signs the audit log's current head for
	// GET /v1/admin/audit/head (nil: 404).
	AuditHead func(context.Context) (string, audit.HeadClaims, error)
	// DevMail, when set, serves the development mailbox at /dev/mail.
	DevMail DevMail
	Mounts  []Mount
	// Tools, when set, are the MCP tools a principal can call here, as
	// /mcp lists them: GET /v1/tools (nil: 404), which the stdio bridge
	// asks so that it lists the same.
	Tools func(*approval.Principal) any
	// CallTool, when set, calls an upstream MCP server's tool for a
	// principal: POST /v1/tools/call (nil: 404), its tools/call result.
	CallTool func(ctx context.Context, p *approval.Principal, name string, args json.RawMessage) (json.RawMessage, error)
	// BodyLimit caps request bodies (default 256 KiB).
	BodyLimit int
	// LinkFailures is how many failed link attempts per client address
	// are allowed in ten minutes before an invalid link answers 429
	// (default 20). A valid link is always served.
	LinkFailures int
	// TrustedProxies are the CIDRs (or addresses) of the proxies whose
	// X-Forwarded-For gives the client address
	// (COUNTERSIGN_TRUSTED_PROXIES); default none.
	TrustedProxies []string
	// Tracer traces every request (default: none).
	Tracer trace.TracerProvider
	// RequestTimeout bounds the store calls of one request (default 4 s;
	// a long-poll gets its wait on top), so that during a store outage
	// every request answers 503 unavailable within 5 s.
	RequestTimeout time.Duration
	// SignIn and Sessions open the approver inbox (/inbox) and the
	// operator console (/console) to people signed in through OIDC; nil:
	// both answer that sign-in is not set up. SessionTTL is how long a
	// sign-in lasts (default 30 minutes).
	SignIn     SignIn
	Sessions   Sessions
	SessionTTL time.Duration
	// Dev, in development mode only, serves the waiting page and the
	// sign-in of the person at the terminal (dev.go); nil: neither exists.
	Dev *DevDoors
}

// Server is the fiber application with its dependencies.
type Server struct {
	cfg     Config
	proxies proxies
	svc     *approval.Service
	app     *fiber.App
	pages   *htmltemplate.Template
	log     *slog.Logger
	origin  string
	secure  bool
	http    *prom.HistogramVec
	tracer  trace.Tracer
	// jwksETag is the ETag of cfg.JWKS.
	jwksETag string
}

// New builds the server and parses its templates (failing fast).
func New(cfg Config) (*Server, error) {
	if cfg.BodyLimit == 0 {
		cfg.BodyLimit = 256 << 10
	}
	if cfg.LinkFailures == 0 {
		cfg.LinkFailures = 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 30 * time.Minute
	}
	if (cfg.SignIn != nil || cfg.Dev != nil) && cfg.Sessions == nil {
		return nil, errors.New("web: sign-in needs a session store")
	}
	// Whatever logger it is given, the edge logs through the redaction.
	cfg.Logger = redact.New(cfg.Logger.Handler())
	trusted, err := parseProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	if cfg.Registry == nil {
		cfg.Registry = prom.NewRegistry()
	}
	pages, err := templates.HTML()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || u.Host == "" {
		return nil, errors.New("web: public URL must be an absolute URL")
	}
	s := &Server{cfg: cfg, proxies: trusted, svc: cfg.Service, pages: pages, log: cfg.Logger,
		origin: u.Scheme + "://" + u.Host, secure: u.Scheme == "https", jwksETag: jwksETag(cfg.JWKS)}
	s.http = prom.NewHistogramVec("countersign_http_request_duration_seconds", "HTTP requests by method, route pattern and response code.",
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 31}, "method", "route", "code")
	tp := cfg.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	s.tracer = tp.Tracer("github.com/countersign/countersign/web")
	if err := cfg.Registry.Register(s.http); err != nil {
		return nil, err
	}
	fc := fiber.Config{
		// Bodies are streamed: fasthttp reads at most 8 KiB of one before
		// the handlers, which authenticate and then read at most their own
		// limit (body.go); no multipart form is parsed ahead of them.
		StreamRequestBody: true, DisablePreParseMultipartForm: true,
		BodyLimit: 4 * cfg.BodyLimit, ErrorHandler: s.errorHandler, DisableStartupMessage: true,
		ReadTimeout: 40 * time.Second, WriteTimeout: 40 * time.Second, IdleTimeout: 2 * time.Minute,
		AppName: "countersign", JSONEncoder: jsonx.Marshal,
	}
	s.app = fiber.New(fc) // c.IP() is the peer; clientAddr reads X-Forwarded-For
	s.routes()
	return s, nil
}

// App returns the fiber application (for tests and listeners).
func (s *Server) App() *fiber.App { return s.app }

func (s *Server) routes() {
	app := s.app
	app.Use(s.observe, s.gate, s.recoverPanic, s.deadline)
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Get("/readyz", s.ready)
	app.Get("/metrics", bridge(s.cfg.Registry, 0))
	app.Get("/static/countersign.css", s.stylesheet)
	app.Get("/static/countersign.js", s.script)
	app.Get("/.well-known/jwks.json", s.jwks)
	app.Get("/favicon.ico", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusNoContent) })

	app.Get("/openapi.json", s.openAPI)
	s.adminRoutes() // before the agents' /v1 group (see adminRoutes)
	api := app.Group("/v1", s.authenticate, readBody(s.cfg.BodyLimit))
	api.Post("/operations", s.prepare)
	api.Get("/operations", s.list)
	api.Get("/operations/:key", s.get)
	api.Post("/operations/:key/send", s.send)
	api.Post("/operations/:key/cancel", s.cancel)
	api.Post("/operations/:key/undo", s.undo)
	api.Get("/operations/:key/events", s.events)
	api.Post("/allowances", s.requestAllowance)
	api.Get("/tools", s.tools)
	api.Post("/tools/call", s.toolCall)
	api.All("/*", func(c *fiber.Ctx) error {
		return approval.Errorf(approval.CodeNotFound, "no such endpoint %s %s", c.Method(), c.Path())
	})

	links := app.Group("/a", s.pageHeaders)
	links.Get("/:token", s.openLink)
	links.Post("/:token", s.decideLink)
	links.Post("/:token/edit", formLimit(s.editFormLimit()), s.editLink)
	links.Post("/:token/revoke", s.revokeLink)
	s.signedInRoutes()

	if s.cfg.DevMail != nil {
		app.Get("/dev/mail", s.devMailList)
		app.Get("/dev/mail/:id", s.devMailShow)
	}
	s.devRoutes()
	for _, m := range s.cfg.Mounts {
		h := m.Handler
		if m.HTTP != nil {
			limit := m.BodyLimit
			if limit == 0 {
				limit = s.cfg.BodyLimit
			}
			h = bridge(m.HTTP, limit)
		}
		if m.Method == "" {
			app.All(m.Path, h)
		} else {
			app.Add(m.Method, m.Path, h)
		}
	}
	app.Get("/", func(c *fiber.Ctx) error {
		return c.Type("txt").SendString("countersign: agents propose, humans countersign.\n" +
			"API: /v1/operations (OpenAPI: /openapi.json)  MCP: /mcp  health: /healthz  metrics: /metrics\n" +
			"Agents authenticate with Authorization: Bearer <api key>; an operator issues keys with countersign keygen.\n")
	})
}

func (s *Server) ready(c *fiber.Ctx) error {
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			// Redis answers but refuses writes (OOM, MISCONF, READONLY): not
			// ready either, since no operation could move, but said so with
			// the class of Redis's error rather than as unreachable.
			var refusing interface {
				StoreState() string
				ErrorClass() string
			}
			if errors.As(err, &refusing) {
				return c.Status(503).JSON(fiber.Map{"status": "unavailable", "store": refusing.StoreState(), "redis_error": refusing.ErrorClass()})
			}
			return c.Status(503).JSON(fiber.Map{"status": "unavailable", "store": "unreachable"})
		}
	}
	body := fiber.Map{"status": "ready"}
	if s.cfg.Upstreams != nil {
		// Each upstream is reported; one that is down refuses only its own
		// calls, so it never makes the service unready.
		body["upstreams"] = s.cfg.Upstreams()
	}
	return c.JSON(body)
}

// httpStatus maps an error code to its HTTP status (SPEC §6).
func httpStatus(code approval.Code) int {
	switch code {
	case approval.CodeInvalidInput, approval.CodeUnknownAction:
		return http.StatusBadRequest
	case approval.CodeUnauthenticated:
		return http.StatusUnauthorized
	case approval.CodeInsufficientScope:
		return http.StatusForbidden
	case approval.CodeNotFound:
		return http.StatusNotFound
	case approval.CodeInvalidState, approval.CodeStaleState:
		return http.StatusConflict
	case approval.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case approval.CodeIdempotencyKeyReused, approval.CodePolicyDenied, approval.CodeNoRoute:
		return http.StatusUnprocessableEntity
	case approval.CodeRateLimited, approval.CodeQuotaExceeded:
		return http.StatusTooManyRequests
	case approval.CodeWritesDisabled, approval.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errorHandler turns any error into the contract's JSON error, or a plain
// page under /a/. Foreign errors are logged and shown as internal.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	var e *approval.Error
	var fe *fiber.Error
	switch {
	case errors.As(err, &e):
		if e.Code == approval.CodeUnavailable {
			s.log.Error("store unavailable", "path", c.Path(), "err", err)
		}
	case errors.As(err, &fe):
		switch fe.Code {
		case http.StatusRequestEntityTooLarge:
			e = approval.Errorf(approval.CodePayloadTooLarge, "request body is larger than %d bytes", 4*s.cfg.BodyLimit)
		case http.StatusNotFound:
			e = approval.Errorf(approval.CodeNotFound, "no such endpoint %s %s", c.Method(), c.Path())
		case http.StatusMethodNotAllowed:
			e = approval.Errorf(approval.CodeNotFound, "method %s not allowed here", c.Method())
		default:
			e = approval.Errorf(approval.CodeInvalidInput, "%s", fe.Message)
		}
	default:
		s.log.Error("internal error", "path", c.Path(), "err", err)
		e = approval.Errorf(approval.CodeInternal, "internal error; it has been logged")
	}
	status := httpStatus(e.Code)
	if e.Code == approval.CodeRateLimited {
		if ra, ok := e.Details["retry_after_seconds"]; ok {
			c.Set(fiber.HeaderRetryAfter, toString(ra))
		}
	}
	if isPage(c) {
		setPageHeaders(c)
		return s.problemPage(c, status, "Something went wrong", e.Message)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(status).JSON(fiber.Map{"error": e})
}

func toString(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case string:
		return x
	}
	return "1"
}

// Shutdown ends long-polls and stops the server.
func (s *Server) Shutdown(ctx context.Context) error {
	s.svc.Close()
	return s.app.ShutdownWithContext(ctx)
}
