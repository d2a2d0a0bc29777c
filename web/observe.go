package web

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/redact"
	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// requestInfo is what the access log learns while a request runs: who made
// it, when that is known past fiber's own locals (the MCP handler).
type requestInfo struct{ principal string }

type requestInfoKey struct{}

// NotePrincipal records, for the access log, the principal a mounted
// handler authenticated. It does nothing outside a request of this server.
func NotePrincipal(ctx context.Context, id string) {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		ri.principal = id
	}
}

// traceContext reads and writes W3C traceparent headers.
var traceContext = propagation.TraceContext{}

// observe times every request, traces it, and writes its access-log line:
// method, path (a link's path is never written: /a/:token), status,
// duration, principal and client address. The logger redacts anything
// shaped like a capability on top.
func (s *Server) observe(c *fiber.Ctx) error {
	start := time.Now()
	method := strings.Clone(c.Method())
	ri := &requestInfo{}
	ctx := traceContext.Extract(c.UserContext(), fasthttpCarrier{c})
	ctx, sp := s.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer))
	c.SetUserContext(context.WithValue(ctx, requestInfoKey{}, ri))

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
	elapsed := time.Since(start)
	route := strings.Clone(c.Route().Path)
	s.http.WithLabelValues(method, route, strconv.Itoa(status)).Observe(elapsed.Seconds())

	path := logPath(c, route)
	who := ri.principal
	if p, ok := c.Locals(principalLocal).(*approval.Principal); ok {
		who = p.ID
	} else if o, ok := c.Locals(operatorLocal).(*approval.Operator); ok {
		who = "operator:" + o.ID
	}
	client := s.proxies.clientAddr(c)

	sp.SetName(method + " " + route)
	sp.SetAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route),
		attribute.String("url.path", path), attribute.Int("http.response.status_code", status),
		attribute.String("client.address", client))
	if who != "" {
		sp.SetAttributes(attribute.String("countersign.principal", who))
	}
	if status >= 500 {
		sp.SetStatus(codes.Error, strconv.Itoa(status))
	}
	sp.End()

	level := slog.LevelInfo
	if status < 400 && (route == "/healthz" || route == "/readyz" || route == "/metrics") {
		level = slog.LevelDebug // probes and scrapes every few seconds
	}
	attrs := []any{"method", method, "path", path, "status", status,
		"duration_ms", float64(elapsed.Microseconds()) / 1000, "client", client}
	if who != "" {
		attrs = append(attrs, "principal", who)
	}
	if tid := sp.SpanContext().TraceID(); tid.IsValid() {
		attrs = append(attrs, "trace_id", tid.String())
	}
	s.log.Log(context.Background(), level, "http request", attrs...)
	return err
}

// logPath is the path of the access log and of spans: the request's own
// path, except where it holds a capability (an approval link, or any
// route's :token), which is written as the redaction writes it. No query
// string: it may hold anything.
func logPath(c *fiber.Ctx, route string) string {
	if isPage(c) {
		return "/a/" + redact.Redacted
	}
	if strings.Contains(route, ":token") {
		return route
	}
	p := strings.Clone(c.Path())
	if len(p) > 200 {
		p = p[:200] + "…"
	}
	return p
}

// fasthttpCarrier reads trace headers from a fiber request.
type fasthttpCarrier struct{ c *fiber.Ctx }

func (f fasthttpCarrier) Get(key string) string { return f.c.Get(key) }
func (f fasthttpCarrier) Set(string, string)    {}
func (f fasthttpCarrier) Keys() []string        { return []string{"traceparent", "tracestate"} }
