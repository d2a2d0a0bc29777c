package telemetry

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// RedisHook counts failed Redis commands and, inside a traced request or
// task, makes a span per command (never with its arguments: they hold
// operation data). Add it with client.AddHook.
type RedisHook struct {
	metrics *Metrics
	tracer  trace.Tracer
}

var _ redis.Hook = (*RedisHook)(nil)

// NewRedisHook counts into m (nil: no counting) and traces with tp.
func NewRedisHook(m *Metrics, tp trace.TracerProvider) *RedisHook {
	return &RedisHook{metrics: m, tracer: tracer(tp)}
}

// failed reports whether err is a real failure: not a missing key, not a
// reply the store expects and handles (a script not cached yet, a consumer
// group that exists), not a shutdown.
func failed(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	msg := err.Error()
	return !strings.HasPrefix(msg, "NOSCRIPT") && !strings.HasPrefix(msg, "BUSYGROUP")
}

func (h *RedisHook) count(command string, err error) {
	// CLIENT SETINFO and the like are go-redis's own connection set-up,
	// which an older server refuses and go-redis ignores.
	if h.metrics != nil && failed(err) && !strings.EqualFold(command, "client") {
		h.metrics.redisErrors.WithLabelValues(strings.ToLower(command)).Inc()
	}
}

// DialHook counts failed connection attempts as command "dial".
func (h *RedisHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		h.count("dial", err)
		return c, err
	}
}

// ProcessHook counts and traces one command.
func (h *RedisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		ctx, sp := h.start(ctx, cmd.Name(), 1)
		err := next(ctx, cmd) // cmd.Err() is set only after the hooks return
		h.count(cmd.Name(), err)
		finish(sp, err)
		return err
	}
}

// ProcessPipelineHook counts each command of a pipeline, traced as one span.
func (h *RedisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		ctx, sp := h.start(ctx, "pipeline", len(cmds))
		err := next(ctx, cmds)
		var first error
		for _, c := range cmds {
			h.count(c.Name(), c.Err())
			if first == nil && failed(c.Err()) {
				first = c.Err()
			}
		}
		finish(sp, first)
		return err
	}
}

// start makes a span only under a span already there: the workers' idle
// reads and the timers' polling make no traces of their own.
func (h *RedisHook) start(ctx context.Context, name string, n int) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	return h.tracer.Start(ctx, "redis "+strings.ToLower(name), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", "redis"),
			attribute.String("db.operation.name", strings.ToLower(name)), attribute.Int("db.operation.batch.size", n)))
}

// finish ends a span (nil: none), marking real failures as errors. The
// error's text is not recorded: Redis echoes arguments in some errors.
func finish(sp trace.Span, err error) {
	if sp == nil {
		return
	}
	if failed(err) {
		sp.SetStatus(codes.Error, "redis error")
	}
	sp.End()
}
