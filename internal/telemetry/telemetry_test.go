package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/prom"
	"github.com/countersign/countersign/internal/telemetry"
	"github.com/countersign/countersign/internal/testing/redistest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

type baseNotifier struct{ err error }

func (n baseNotifier) Notify(context.Context, approval.Notice) (map[string]string, error) {
	return nil, n.err
}

type upd struct{ baseNotifier }

func (upd) Update(context.Context, approval.Delivery, approval.Message) error { return nil }

type per struct{ baseNotifier }

func (per) PerApprover(string) bool { return true }

type both struct{ baseNotifier }

func (both) Update(context.Context, approval.Delivery, approval.Message) error { return nil }
func (both) PerApprover(string) bool                                           { return true }

// Every combination of the optional interfaces survives the wrapper: the
// service finds them by type assertion.
func TestWrapNotifierKeepsInterfaces(t *testing.T) {
	for _, n := range []approval.Notifier{baseNotifier{}, upd{}, per{}, both{}} {
		w := telemetry.WrapNotifier("x", n, nil, nil)
		_, wu := w.(approval.Updater)
		_, wp := w.(approval.PerApprover)
		_, nu := n.(approval.Updater)
		_, np := n.(approval.PerApprover)
		if wu != nu || wp != np {
			t.Errorf("%T wrapped: updater %v (want %v), per-approver %v (want %v)", n, wu, nu, wp, np)
		}
	}
}

type baseAction struct{ err error }

func (baseAction) Name() string { return "test.effect" }
func (baseAction) Prepare(context.Context, approval.PrepareRequest) (*approval.Prepared, error) {
	return &approval.Prepared{}, nil
}
func (a baseAction) Execute(context.Context, *approval.Operation) (json.RawMessage, error) {
	time.Sleep(time.Millisecond)
	return json.RawMessage(`{}`), a.err
}

type rech struct{ baseAction }

func (rech) Recheck(context.Context, *approval.Operation) error { return nil }

type und struct{ baseAction }

func (und) UndoInput(context.Context, *approval.Operation) (string, json.RawMessage, error) {
	return "", nil, nil
}

type rechUnd struct{ baseAction }

func (rechUnd) Recheck(context.Context, *approval.Operation) error { return nil }
func (rechUnd) UndoInput(context.Context, *approval.Operation) (string, json.RawMessage, error) {
	return "", nil, nil
}

func TestWrapActionKeepsInterfaces(t *testing.T) {
	for _, a := range []approval.Action{baseAction{}, rech{}, und{}, rechUnd{}} {
		w := telemetry.WrapAction(a, nil, nil)
		_, wr := w.(approval.Rechecker)
		_, wu := w.(approval.Undoer)
		_, ar := a.(approval.Rechecker)
		_, au := a.(approval.Undoer)
		if wr != ar || wu != au || w.Name() != a.Name() {
			t.Errorf("%T wrapped: rechecker %v (want %v), undoer %v (want %v)", a, wr, ar, wu, au)
		}
	}
}

// Executions and deliveries are counted by outcome, and traced without
// the error's text.
func TestWrappersMeasureAndTrace(t *testing.T) {
	reg := prom.NewRegistry()
	m, err := telemetry.NewMetrics(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	op := &approval.Operation{Key: approval.NewOperationKey(), Action: "test.effect"}

	ok := telemetry.WrapAction(baseAction{}, m, tp)
	stale := telemetry.WrapAction(baseAction{err: &approval.ExecError{Code: approval.CodeStaleState, Message: "secret detail"}}, m, tp)
	for range 2 {
		_, _ = ok.Execute(context.Background(), op)
	}
	_, _ = stale.Execute(context.Background(), op)
	n := telemetry.WrapNotifier("email", baseNotifier{err: errors.New("smtp said: the link https://x/a/abc")}, m, tp)
	_, _ = n.Notify(context.Background(), approval.Notice{Message: approval.Message{OperationKey: op.Key}})

	want := `
# HELP countersign_executions_total Executions of approved operations, by action and outcome (succeeded, or the error code).
# TYPE countersign_executions_total counter
countersign_executions_total{action="test.effect",outcome="stale_state"} 1
countersign_executions_total{action="test.effect",outcome="succeeded"} 2
# HELP countersign_notifications_total Notification attempts, by channel and outcome (delivered, failed); failed attempts are retried.
# TYPE countersign_notifications_total counter
countersign_notifications_total{channel="email",outcome="failed"} 1
`
	if got := reg.Text("countersign_executions_total", "countersign_notifications_total"); got != strings.TrimPrefix(want, "\n") {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name+"/"+s.Status.Description)
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.Emit(), "secret") || strings.Contains(a.Value.Emit(), "/a/") {
				t.Errorf("span %s holds an error's text: %v", s.Name, a)
			}
		}
		if strings.Contains(s.Status.Description, "secret") || strings.Contains(s.Status.Description, "/a/") {
			t.Errorf("span %s status holds an error's text: %q", s.Name, s.Status.Description)
		}
	}
	if got := strings.Join(names, " "); got != "execute test.effect/ execute test.effect/ execute test.effect/stale_state notify email/delivery failed" {
		t.Errorf("spans = %s", got)
	}
}

// OnEvent counts transitions (not every event) by action and status,
// decisions by channel, and the time from send to decision.
func TestOnEventCountsTransitions(t *testing.T) {
	reg := prom.NewRegistry()
	m, err := telemetry.NewMetrics(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ev := func(name string, from, to approval.Status, ch string, at time.Duration) approval.Event {
		return approval.Event{Event: name, Action: "email.send", From: from, Status: to, Channel: ch, Time: sent.Add(at), SentAt: &sent}
	}
	for _, e := range []approval.Event{
		ev("prepared", approval.StatusDraft, approval.StatusDraft, "", 0),
		ev("sent", approval.StatusDraft, approval.StatusPending, "", 0),
		ev("notified", approval.StatusPending, approval.StatusPending, "email", time.Second),
		ev("approval", approval.StatusPending, approval.StatusPending, "email", 90*time.Second),
		ev("approved", approval.StatusPending, approval.StatusApproved, "", 90*time.Second),
		{Event: "expired", Status: approval.StatusExpired, Action: "slack.post_message"}, // from the sweep
	} {
		m.OnEvent(e)
	}
	want := `
# HELP countersign_decisions_total Approvers' decisions, by channel (email, slack, console, teams, …) and outcome (approve, reject).
# TYPE countersign_decisions_total counter
countersign_decisions_total{channel="email",outcome="approve"} 1
# HELP countersign_operations_total Operations that entered a status, by action and status.
# TYPE countersign_operations_total counter
countersign_operations_total{action="email.send",status="approved"} 1
countersign_operations_total{action="email.send",status="draft"} 1
countersign_operations_total{action="email.send",status="pending_approval"} 1
countersign_operations_total{action="slack.post_message",status="expired"} 1
`
	if got := reg.Text("countersign_operations_total", "countersign_decisions_total"); got != strings.TrimPrefix(want, "\n") {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
	if n := strings.Count(reg.Text("countersign_decision_latency_seconds"), "countersign_decision_latency_seconds_count{"); n != 1 {
		t.Errorf("decision latency series = %d, want 1", n)
	}
}

// The hook counts real Redis failures (here WRONGTYPE), not misses.
func TestRedisHookCountsErrors(t *testing.T) {
	reg := prom.NewRegistry()
	m, err := telemetry.NewMetrics(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Start(t).Client(t)
	rdb.AddHook(telemetry.NewRedisHook(m, nil))
	ctx := context.Background()
	if err := rdb.Set(ctx, "telemetry-test", "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	_ = rdb.Get(ctx, "telemetry-missing").Err()    // redis.Nil: not an error
	_ = rdb.HGet(ctx, "telemetry-test", "f").Err() // WRONGTYPE
	pipe := rdb.Pipeline()
	pipe.LPush(ctx, "telemetry-test", "y") // WRONGTYPE
	pipe.Get(ctx, "telemetry-test")
	_, _ = pipe.Exec(ctx)
	want := `
# HELP countersign_redis_errors_total Redis commands that failed (not counting a missing key or an expected reply), by command.
# TYPE countersign_redis_errors_total counter
countersign_redis_errors_total{command="hget"} 1
countersign_redis_errors_total{command="lpush"} 1
`
	if got := reg.Text("countersign_redis_errors_total"); got != strings.TrimPrefix(want, "\n") {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
}
