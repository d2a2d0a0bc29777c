// Package web is countersign's HTTP edge (fiber): the agents' REST API,
// the approval pages humans open from their links, the development
// mailbox, health and metrics. It translates approval.Error codes to HTTP
// statuses and never shows internal error text.
package web

import (
	"context"
	"errors"
	"github.com/countersign/countersign/internal/jsonx"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/templates"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	htmltemplate "html/template"
)

// Limiter counts attempts against limits shared by all replicas.
type Limiter interface {
	Allow(ctx context.Context, bucket string, limit int, window time.Duration) (bool, time.Duration, error)
	Count(ctx context.Context, bucket string) (int, time.Duration, error)
}

// DefaultAPIRate is the requests per minute a principal may make (REST and
// MCP share the budget).
const DefaultAPIRate = 600

// Mount adds a handler that another adapter provides (Slack, MCP).
type Mount struct {
	Method  string // "" for all methods
	Path    string
	Handler fiber.Handler
}

// Config builds the HTTP edge.
type Config struct {
	Service   *approval.Service
	Limiter   Limiter
	Ready     func(context.Context) error
	PublicURL string
	Registry  *prometheus.Registry
	Logger    *slog.Logger
	// DevMail, when set, serves the development mailbox at /dev/mail.
	DevMail DevMail
	Mounts  []Mount
	// BodyLimit caps request bodies (default 256 KiB).
	BodyLimit int
	// APIRate is requests per minute per principal (default 600).
	APIRate int
	// LinkFailures is how many failed link attempts per client IP are
	// allowed in ten minutes before /a/ answers 429 (default 20).
	LinkFailures int
	// TrustedProxies, when set, are the proxies whose X-Forwarded-For
	// gives the client IP.
	TrustedProxies []string
}

// Server is the fiber application with its dependencies.
type Server struct {
	cfg    Config
	svc    *approval.Service
	app    *fiber.App
	pages  *htmltemplate.Template
	log    *slog.Logger
	origin string
	secure bool
	http   *prometheus.HistogramVec
}

// New builds the server and parses its templates (failing fast).
func New(cfg Config) (*Server, error) {
	if cfg.BodyLimit == 0 {
		cfg.BodyLimit = 256 << 10
	}
	if cfg.APIRate == 0 {
		cfg.APIRate = DefaultAPIRate
	}
	if cfg.LinkFailures == 0 {
		cfg.LinkFailures = 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	pages, err := templates.HTML()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || u.Host == "" {
		return nil, errors.New("web: public URL must be an absolute URL")
	}
	s := &Server{cfg: cfg, svc: cfg.Service, pages: pages, log: cfg.Logger,
		origin: u.Scheme + "://" + u.Host, secure: u.Scheme == "https"}
	s.http = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "countersign_http_request_duration_seconds", Help: "HTTP requests by route and status.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 31},
	}, []string{"method", "route", "status"})
	if err := cfg.Registry.Register(s.http); err != nil {
		return nil, err
	}
	fc := fiber.Config{
		// fasthttp cuts a connection whose body passes its limit, and the
		// client may see a reset instead of the answer. So fasthttp gets a
		// larger ceiling, and bodies between the two get a proper 413.
		BodyLimit: 4 * cfg.BodyLimit, ErrorHandler: s.errorHandler, DisableStartupMessage: true,
		ReadTimeout: 40 * time.Second, WriteTimeout: 40 * time.Second, IdleTimeout: 2 * time.Minute,
		AppName: "countersign", JSONEncoder: jsonx.Marshal,
	}
	if len(cfg.TrustedProxies) > 0 {
		fc.ProxyHeader = fiber.HeaderXForwardedFor
		fc.EnableTrustedProxyCheck = true
		fc.TrustedProxies = cfg.TrustedProxies
	}
	s.app = fiber.New(fc)
	s.routes()
	return s, nil
}

// App returns the fiber application (for tests and listeners).
func (s *Server) App() *fiber.App { return s.app }

func (s *Server) routes() {
	app := s.app
	app.Use(s.observe)
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Get("/readyz", s.ready)
	app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})))
	app.Get("/static/countersign.css", s.stylesheet)
	app.Get("/favicon.ico", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusNoContent) })

	api := app.Group("/v1", s.limitBody, s.authenticate)
	api.Post("/operations", s.prepare)
	api.Get("/operations", s.list)
	api.Get("/operations/:key", s.get)
	api.Post("/operations/:key/send", s.send)
	api.Post("/operations/:key/cancel", s.cancel)
	api.Post("/operations/:key/undo", s.undo)
	api.Get("/operations/:key/events", s.events)
	api.All("/*", func(c *fiber.Ctx) error {
		return approval.Errorf(approval.CodeNotFound, "no such endpoint %s %s", c.Method(), c.Path())
	})

	links := app.Group("/a", s.pageHeaders, s.linkRateLimit)
	links.Get("/:token", s.openLink)
	links.Post("/:token", s.decideLink)

	if s.cfg.DevMail != nil {
		app.Get("/dev/mail", s.devMailList)
		app.Get("/dev/mail/:id", s.devMailShow)
	}
	for _, m := range s.cfg.Mounts {
		if m.Method == "" {
			app.All(m.Path, m.Handler)
		} else {
			app.Add(m.Method, m.Path, m.Handler)
		}
	}
	app.Get("/", func(c *fiber.Ctx) error {
		return c.Type("txt").SendString("countersign: agents propose, humans countersign.\nAPI: /v1/operations  health: /healthz  metrics: /metrics\n")
	})
}

// observe records request durations by route pattern (low cardinality).
func (s *Server) observe(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		var fe *fiber.Error
		if errors.As(err, &fe) {
			status = fe.Code
		} else if e := (*approval.Error)(nil); errors.As(err, &e) {
			status = httpStatus(e.Code)
		} else {
			status = 500
		}
	}
	s.http.WithLabelValues(strings.Clone(c.Method()), strings.Clone(c.Route().Path), strconv.Itoa(status)).
		Observe(time.Since(start).Seconds())
	return err
}

// limitBody answers payload_too_large for bodies over the limit.
func (s *Server) limitBody(c *fiber.Ctx) error {
	if len(c.Body()) > s.cfg.BodyLimit {
		return approval.Errorf(approval.CodePayloadTooLarge, "request body is larger than %d bytes", s.cfg.BodyLimit)
	}
	return c.Next()
}

func (s *Server) ready(c *fiber.Ctx) error {
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			return c.Status(503).JSON(fiber.Map{"status": "unavailable", "store": "unreachable"})
		}
	}
	return c.JSON(fiber.Map{"status": "ready"})
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
	case approval.CodeRateLimited:
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
	if strings.HasPrefix(c.Path(), "/a/") {
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
