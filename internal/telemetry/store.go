package telemetry

import (
	"context"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/store"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Store is the Redis store with a span around each operation call made
// inside a traced request or task, and a root span per worker task. Every
// other method (and every one added later) is the store's own, untraced.
type Store struct {
	*store.Redis
	tracer trace.Tracer
}

var (
	_ approval.Store         = (*Store)(nil)
	_ approval.Queue         = (*Store)(nil)
	_ approval.OperatorStore = (*Store)(nil)
)

// TraceStore wraps r.
func TraceStore(r *store.Redis, tp trace.TracerProvider) *Store {
	return &Store{Redis: r, tracer: tracer(tp)}
}

// start begins a child span for a store call (none outside a trace: the
// timers' polling makes no traces of its own).
func (s *Store) start(ctx context.Context, name string, ref approval.Ref) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{attribute.String("db.system.name", "redis")}
	if ref.Key != "" {
		attrs = append(attrs, attribute.String("countersign.operation", ref.Key))
	}
	return s.tracer.Start(ctx, "store."+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// end finishes a store span with the error's code (never its text).
func end(sp trace.Span, err error) {
	if sp == nil {
		return
	}
	if err != nil {
		sp.SetAttributes(attribute.String("countersign.error", string(approval.ErrorCode(err))))
		sp.SetStatus(codes.Error, string(approval.ErrorCode(err)))
	}
	sp.End()
}

// Consume runs the workers with a root span per task: the trace of an
// operation's notification or execution starts where a worker picks it up.
func (s *Store) Consume(ctx context.Context, consumer string, workers int, handle func(context.Context, approval.Task) error) {
	s.Redis.Consume(ctx, consumer, workers, func(ctx context.Context, t approval.Task) error {
		ctx, sp := s.tracer.Start(ctx, "countersign.task", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attribute.String("countersign.operation", t.Ref.Key), attribute.String("messaging.system", "redis"),
				attribute.String("messaging.operation.type", "process")))
		err := handle(ctx, t)
		end(sp, err)
		return err
	})
}

func (s *Store) Create(ctx context.Context, op *approval.Operation, t approval.CreateTransition) (err error) {
	ctx, sp := s.start(ctx, "Create", op.Ref())
	defer func() { end(sp, err) }()
	return s.Redis.Create(ctx, op, t)
}

func (s *Store) Get(ctx context.Context, ref approval.Ref) (_ *approval.Operation, err error) {
	ctx, sp := s.start(ctx, "Get", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Get(ctx, ref)
}

func (s *Store) Read(ctx context.Context, ref approval.Ref, perMinute int) (_ *approval.Operation, err error) {
	ctx, sp := s.start(ctx, "Read", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Read(ctx, ref, perMinute)
}

func (s *Store) ReadStanding(ctx context.Context, ref approval.Ref, perMinute int) (_ approval.Standing, _ func() (*approval.Operation, error), err error) {
	ctx, sp := s.start(ctx, "Read", ref)
	defer func() { end(sp, err) }()
	return s.Redis.ReadStanding(ctx, ref, perMinute)
}

func (s *Store) List(ctx context.Context, principal string, limit int) (_ []*approval.Operation, err error) {
	ctx, sp := s.start(ctx, "List", approval.Ref{})
	defer func() { end(sp, err) }()
	return s.Redis.List(ctx, principal, limit)
}

func (s *Store) Events(ctx context.Context, ref approval.Ref) (_ []approval.Event, err error) {
	ctx, sp := s.start(ctx, "Events", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Events(ctx, ref)
}

func (s *Store) Send(ctx context.Context, ref approval.Ref, t approval.SendTransition) (_ approval.Status, _ *approval.Operation, err error) {
	ctx, sp := s.start(ctx, "Send", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Send(ctx, ref, t)
}

func (s *Store) Decide(ctx context.Context, ref approval.Ref, t approval.DecideTransition) (res approval.DecideResult, err error) {
	ctx, sp := s.start(ctx, "Decide", ref)
	defer func() {
		if sp != nil {
			sp.SetAttributes(attribute.String("countersign.channel", t.Decision.Via),
				attribute.String("countersign.decision.outcome", string(res.Outcome)))
		}
		end(sp, err)
	}()
	return s.Redis.Decide(ctx, ref, t)
}

func (s *Store) Claim(ctx context.Context, ref approval.Ref, t approval.ClaimTransition) (won bool, _ approval.Status, err error) {
	ctx, sp := s.start(ctx, "Claim", ref)
	defer func() {
		if sp != nil {
			sp.SetAttributes(attribute.Bool("countersign.claim.won", won))
		}
		end(sp, err)
	}()
	return s.Redis.Claim(ctx, ref, t)
}

func (s *Store) Finish(ctx context.Context, ref approval.Ref, t approval.FinishTransition) (_ bool, err error) {
	ctx, sp := s.start(ctx, "Finish", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Finish(ctx, ref, t)
}

func (s *Store) Fence(ctx context.Context, ref approval.Ref, token string, ttl time.Duration) (_ approval.FenceResult, _ approval.Status, err error) {
	ctx, sp := s.start(ctx, "Fence", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Fence(ctx, ref, token, ttl)
}

func (s *Store) Settle(ctx context.Context, ref approval.Ref, t approval.SettleTransition) (_ approval.Status, _ bool, err error) {
	ctx, sp := s.start(ctx, "Settle", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Settle(ctx, ref, t)
}

func (s *Store) Cancel(ctx context.Context, ref approval.Ref, t approval.Step) (_ approval.Status, _ bool, err error) {
	ctx, sp := s.start(ctx, "Cancel", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Cancel(ctx, ref, t)
}

func (s *Store) Expire(ctx context.Context, ref approval.Ref, t approval.Step) (_ approval.Status, _ bool, err error) {
	ctx, sp := s.start(ctx, "Expire", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Expire(ctx, ref, t)
}

func (s *Store) Stale(ctx context.Context, ref approval.Ref, t approval.StaleTransition) (_ approval.Status, _ bool, err error) {
	ctx, sp := s.start(ctx, "Stale", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Stale(ctx, ref, t)
}

func (s *Store) AddCapability(ctx context.Context, ref approval.Ref, nonceHash string, c approval.Capability, now time.Time) (_ bool, err error) {
	ctx, sp := s.start(ctx, "AddCapability", ref)
	defer func() { end(sp, err) }()
	return s.Redis.AddCapability(ctx, ref, nonceHash, c, now)
}

func (s *Store) Capability(ctx context.Context, ref approval.Ref, nonceHash string) (_ *approval.Capability, err error) {
	ctx, sp := s.start(ctx, "Capability", ref)
	defer func() { end(sp, err) }()
	return s.Redis.Capability(ctx, ref, nonceHash)
}

func (s *Store) RecordDelivery(ctx context.Context, ref approval.Ref, d approval.Delivery, ev approval.Event) (_ bool, _ *approval.Operation, err error) {
	ctx, sp := s.start(ctx, "RecordDelivery", ref)
	defer func() { end(sp, err) }()
	return s.Redis.RecordDelivery(ctx, ref, d, ev)
}

func (s *Store) FailDelivery(ctx context.Context, ref approval.Ref, job string, least time.Duration, ev approval.Event) (_ int, _ time.Duration, err error) {
	ctx, sp := s.start(ctx, "FailDelivery", ref)
	defer func() { end(sp, err) }()
	return s.Redis.FailDelivery(ctx, ref, job, least, ev)
}
