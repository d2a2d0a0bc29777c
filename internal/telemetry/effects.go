package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/countersign/countersign/approval"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The wrappers below measure and trace the channels and actions. Each
// keeps the optional interfaces of what it wraps (Updater, PerApprover;
// Rechecker, Undoer), because the service looks for them by type
// assertion: a wrapper that hid one would silently change behaviour
// (effects_test.go checks every combination).

// notifier measures and traces one channel's deliveries.
type notifier struct {
	next    approval.Notifier
	channel string
	m       *Metrics
	tracer  trace.Tracer
}

// Unwrap gives the service the channel's other optional interfaces.
func (n *notifier) Unwrap() any { return n.next }

func (n *notifier) Notify(ctx context.Context, notice approval.Notice) (map[string]string, error) {
	ctx, sp := n.tracer.Start(ctx, "notify "+n.channel, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("countersign.channel", n.channel),
			attribute.String("countersign.operation", notice.Message.OperationKey),
			attribute.String("countersign.job", notice.Job.ID)))
	start := time.Now()
	h, err := n.next.Notify(ctx, notice)
	if n.m != nil {
		outcome := "delivered"
		if err != nil {
			outcome = "failed"
		}
		n.m.notifications.WithLabelValues(n.channel, outcome).Inc()
		n.m.notifyTime.WithLabelValues(n.channel).Observe(time.Since(start).Seconds())
	}
	if err != nil {
		// The error's text is not recorded: a channel's error may quote
		// what it was sending.
		sp.SetStatus(codes.Error, "delivery failed")
	}
	sp.End()
	return h, err
}

type updater struct {
	next    approval.Updater
	channel string
	tracer  trace.Tracer
}

func (u updater) Update(ctx context.Context, d approval.Delivery, m approval.Message) error {
	ctx, sp := u.tracer.Start(ctx, "update "+u.channel, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("countersign.channel", u.channel), attribute.String("countersign.job", d.Job)))
	err := u.next.Update(ctx, d, m)
	if err != nil {
		sp.SetStatus(codes.Error, "update failed")
	}
	sp.End()
	return err
}

// WrapNotifiers returns the channels measured into m and traced with tp.
func WrapNotifiers(ns map[string]approval.Notifier, m *Metrics, tp trace.TracerProvider) map[string]approval.Notifier {
	out := make(map[string]approval.Notifier, len(ns))
	for ch, n := range ns {
		out[ch] = WrapNotifier(ch, n, m, tp)
	}
	return out
}

// WrapNotifier wraps one channel, keeping its optional interfaces.
func WrapNotifier(channel string, n approval.Notifier, m *Metrics, tp trace.TracerProvider) approval.Notifier {
	base := &notifier{next: n, channel: channel, m: m, tracer: tracer(tp)}
	u, isU := n.(approval.Updater)
	p, isP := n.(approval.PerApprover)
	up := updater{next: u, channel: channel, tracer: base.tracer}
	switch {
	case isU && isP:
		return struct {
			*notifier
			updater
			perApprover
		}{base, up, perApprover{p}}
	case isU:
		return struct {
			*notifier
			updater
		}{base, up}
	case isP:
		return struct {
			*notifier
			perApprover
		}{base, perApprover{p}}
	}
	return base
}

// perApprover forwards PerApprover by name: an embedded approval.PerApprover
// would be a field named like its method, which hides the method.
type perApprover struct{ next approval.PerApprover }

func (p perApprover) PerApprover(target string) bool { return p.next.PerApprover(target) }

// action measures and traces one action's preparation and execution.
type action struct {
	next   approval.Action
	m      *Metrics
	tracer trace.Tracer
}

func (a *action) Name() string { return a.next.Name() }

// Unwrap gives the service the action's other optional interfaces.
func (a *action) Unwrap() any { return a.next }

func (a *action) Prepare(ctx context.Context, req approval.PrepareRequest) (_ *approval.Prepared, err error) {
	ctx, sp := a.tracer.Start(ctx, "prepare "+a.next.Name(), trace.WithAttributes(attribute.String("countersign.action", a.next.Name())))
	defer func() { endCoded(sp, err) }()
	return a.next.Prepare(ctx, req)
}

func (a *action) Execute(ctx context.Context, op *approval.Operation) (json.RawMessage, error) {
	ctx, sp := a.tracer.Start(ctx, "execute "+op.Action, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("countersign.action", op.Action), attribute.String("countersign.operation", op.Key)))
	start := time.Now()
	res, err := a.next.Execute(ctx, op)
	outcome := "succeeded"
	if err != nil {
		outcome = string(approval.CodeExecutionFailed)
		var ee *approval.ExecError
		if errors.As(err, &ee) {
			outcome = string(ee.Code)
		}
	}
	if a.m != nil {
		a.m.executions.WithLabelValues(op.Action, outcome).Inc()
		a.m.executionTime.WithLabelValues(op.Action, outcome).Observe(time.Since(start).Seconds())
	}
	sp.SetAttributes(attribute.String("countersign.outcome", outcome))
	if err != nil {
		sp.SetStatus(codes.Error, outcome)
	}
	sp.End()
	return res, err
}

type rechecker struct {
	next   approval.Rechecker
	name   string
	tracer trace.Tracer
}

func (r rechecker) Recheck(ctx context.Context, op *approval.Operation) (err error) {
	ctx, sp := r.tracer.Start(ctx, "recheck "+r.name, trace.WithAttributes(attribute.String("countersign.action", r.name),
		attribute.String("countersign.operation", op.Key)))
	defer func() { endCoded(sp, err) }()
	return r.next.Recheck(ctx, op)
}

type undoer struct{ approval.Undoer }

// WrapActions returns the actions measured into m and traced with tp.
func WrapActions(as []approval.Action, m *Metrics, tp trace.TracerProvider) []approval.Action {
	out := make([]approval.Action, len(as))
	for i, a := range as {
		out[i] = WrapAction(a, m, tp)
	}
	return out
}

// Irreversible forwards the wrapped action's answer (every wrapper embeds
// *action, so each combination below has it); an action that does not
// implement approval.IrreversibleOps has no irreversible operations.
func (a *action) Irreversible(pinned map[string][]string) (bool, string) {
	if io, ok := a.next.(approval.IrreversibleOps); ok {
		return io.Irreversible(pinned)
	}
	return false, ""
}

// ScopeBase forwards the wrapped action's scope base ("" where the action's
// name is its scope).
func (a *action) ScopeBase() string {
	if sb, ok := a.next.(approval.ScopeBaser); ok {
		return sb.ScopeBase()
	}
	return ""
}

// WrapAction wraps one action, keeping its optional interfaces.
func WrapAction(a approval.Action, m *Metrics, tp trace.TracerProvider) approval.Action {
	base := &action{next: a, m: m, tracer: tracer(tp)}
	r, isR := a.(approval.Rechecker)
	u, isU := a.(approval.Undoer)
	rc := rechecker{next: r, name: a.Name(), tracer: base.tracer}
	switch {
	case isR && isU:
		return struct {
			*action
			rechecker
			undoer
		}{base, rc, undoer{u}}
	case isR:
		return struct {
			*action
			rechecker
		}{base, rc}
	case isU:
		return struct {
			*action
			undoer
		}{base, undoer{u}}
	}
	return base
}

// endCoded ends a span with the coded error, if any (never its text).
func endCoded(sp trace.Span, err error) {
	if err != nil {
		code := string(approval.ErrorCode(err))
		var ee *approval.ExecError
		if errors.As(err, &ee) {
			code = string(ee.Code)
		}
		sp.SetAttributes(attribute.String("countersign.error", code))
		sp.SetStatus(codes.Error, code)
	}
	sp.End()
}
