// Package telemetry is countersign's observability: Prometheus metrics
// named by the Prometheus conventions, OpenTelemetry traces, and the
// wrappers that put both around the store, the channels and the actions,
// so that the domain (package approval) carries neither.
//
// Nothing here ever records a capability, an API key or agent text: labels
// are bounded sets (actions, statuses, channels, outcomes), and span
// attributes are operation keys, action and channel names, and outcomes.
package telemetry

import (
	"runtime/debug"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/prom"
)

// Metrics are the application metrics of countersign serve.
type Metrics struct {
	events        *prom.CounterVec
	operations    *prom.CounterVec
	decisions     *prom.CounterVec
	decisionTime  *prom.HistogramVec
	notifications *prom.CounterVec
	notifyTime    *prom.HistogramVec
	executions    *prom.CounterVec
	executionTime *prom.HistogramVec
	redisErrors   *prom.CounterVec
	callbacks     *prom.CounterVec
	decodeErrors  *prom.Counter
	decodeVec     *prom.CounterVec
}

// Buckets of the decision latency: humans take seconds to days.
var decisionBuckets = []float64{5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, 259200, 604800}

// Buckets of executions and deliveries: remote calls, up to minutes.
var remoteBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// NewMetrics registers the application metrics on reg, with
// countersign_build_info set from the binary's build information.
func NewMetrics(reg *prom.Registry, version string) (*Metrics, error) {
	m := &Metrics{
		events: prom.NewCounterVec("countersign_events_total",
			"Audit events, by event name and the operation status after the event.",
			"event", "status"),
		operations: prom.NewCounterVec("countersign_operations_total",
			"Operations that entered a status, by action and status.",
			"action", "status"),
		decisions: prom.NewCounterVec("countersign_decisions_total",
			"Approvers' decisions, by channel (email, slack, console, teams, …) and outcome (approve, reject).",
			"channel", "outcome"),
		decisionTime: prom.NewHistogramVec("countersign_decision_latency_seconds",
			"Time from an operation's send to each approver's decision, by outcome (approve, reject).",
			decisionBuckets, "outcome"),
		notifications: prom.NewCounterVec("countersign_notifications_total",
			"Notification attempts, by channel and outcome (delivered, failed); failed attempts are retried.",
			"channel", "outcome"),
		notifyTime: prom.NewHistogramVec("countersign_notification_duration_seconds",
			"Time one notification attempt took, by channel.",
			remoteBuckets, "channel"),
		executions: prom.NewCounterVec("countersign_executions_total",
			"Executions of approved operations, by action and outcome (succeeded, or the error code).",
			"action", "outcome"),
		executionTime: prom.NewHistogramVec("countersign_execution_duration_seconds",
			"Time an action's execution took, by action and outcome.",
			remoteBuckets, "action", "outcome"),
		redisErrors: prom.NewCounterVec("countersign_redis_errors_total",
			"Redis commands that failed (not counting a missing key or an expected reply), by command.",
			"command"),
		callbacks: prom.NewCounterVec("countersign_status_webhooks_total",
			"Status webhook (callback_url) attempts, by outcome (delivered, failed); failed attempts are retried.",
			"outcome"),
		decodeVec: prom.NewCounterVec("countersign_store_decode_errors_total",
			"Stored operations that could not be read (logged with their key); each read of one counts."),
	}
	m.decodeErrors = m.decodeVec.WithLabelValues() // served as 0 from the start
	build := prom.NewGaugeVec("countersign_build_info",
		"Always 1; its labels say which build is running.",
		"version", "revision", "goversion")
	rev, gov := buildFacts()
	build.WithLabelValues(version, rev, gov).Set(1)
	for _, c := range []prom.Collector{m.events, m.operations, m.decisions, m.decisionTime, m.notifications,
		m.notifyTime, m.executions, m.executionTime, m.redisErrors, m.callbacks, m.decodeVec, build} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// buildFacts are the VCS revision and the Go version of the binary.
func buildFacts() (revision, goVersion string) {
	revision = "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return revision, "unknown"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			revision = s.Value
		}
	}
	return revision, bi.GoVersion
}

// OnEvent counts one audit event (an approval.Config OnEvent hook).
func (m *Metrics) OnEvent(ev approval.Event) {
	m.events.WithLabelValues(ev.Event, string(ev.Status)).Inc()
	if ev.Event == "prepared" || (ev.Status != "" && ev.Status != ev.From) {
		m.operations.WithLabelValues(label(ev.Action), string(ev.Status)).Inc()
	}
	var outcome string
	switch ev.Event {
	case "approval":
		outcome = "approve"
	case "rejection":
		outcome = "reject"
	default:
		return
	}
	m.decisions.WithLabelValues(label(ev.Channel), outcome).Inc()
	if ev.SentAt != nil {
		if d := ev.Time.Sub(*ev.SentAt); d >= 0 {
			m.decisionTime.WithLabelValues(outcome).Observe(d.Seconds())
		}
	}
}

// OnCallback counts one status webhook attempt (an approval.Config
// OnCallback hook).
func (m *Metrics) OnCallback(outcome string) { m.callbacks.WithLabelValues(outcome).Inc() }

// OnDecodeError counts one unreadable stored operation (a store.Redis
// OnDecodeError hook); the key is logged by the store, never a label.
func (m *Metrics) OnDecodeError(string) { m.decodeErrors.Inc() }

// label keeps an empty value readable in a label.
func label(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
