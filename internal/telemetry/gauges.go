package telemetry

import (
	"context"
	"time"

	"github.com/countersign/countersign/internal/prom"
	"github.com/countersign/countersign/store"
)

// StatsSource is what the gauges read at each scrape (store.Redis).
type StatsSource interface {
	Stats(ctx context.Context, principals []string, now time.Time, horizon time.Duration) (store.Stats, error)
}

// ExpiringHorizon is how soon an approval window must end for the
// operation to count in countersign_approvals_expiring_soon.
const ExpiringHorizon = 15 * time.Minute

// Help texts of the store's gauges.
const (
	openHelp     = "Operations not yet ended, by status (draft, pending_approval, approved, executing), across every replica."
	expiringHelp = "Pending operations whose approval window ends within 15 minutes (counted up to 500 per shard)."
	depthHelp    = "Worker tasks queued or in progress, on every shard."
	oldestHelp   = "Age of the oldest worker task queued or in progress (0 when the queue is empty)."
	stuckHelp    = "Operations executing for longer than the stuck threshold (5m, as ops list --stuck): a human must settle them (ops reconcile)."
	upHelp       = "1 if the store answered the reads behind the gauges at this scrape, 0 if not."
)

// RegisterGauges adds the store's gauges to reg: operations open by status,
// approvals about to expire, and the work queue's depth and oldest task.
// principals lists the principals whose operations are counted. They are
// read from the store when Prometheus scrapes, so they are the store's
// (shared by every replica), never one process's view.
func RegisterGauges(reg *prom.Registry, src StatsSource, principals func() []string, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	return reg.Register(prom.CollectorFunc{
		MetricNames: []string{"countersign_operations_open", "countersign_approvals_expiring_soon", "countersign_queue_depth",
			"countersign_queue_oldest_task_age_seconds", "countersign_stuck_executions", "countersign_store_stats_up"},
		Func: func() []prom.Family {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			s, err := src.Stats(ctx, principals(), now(), ExpiringHorizon)
			if err != nil {
				return []prom.Family{prom.GaugeSample("countersign_store_stats_up", upHelp, 0)}
			}
			open := prom.Family{Name: "countersign_operations_open", Help: openHelp, Type: "gauge"}
			for _, st := range []struct {
				status string
				n      int64
			}{{"approved", s.Approved}, {"draft", s.Drafts}, {"executing", s.Executing}, {"pending_approval", s.Pending}} {
				open.Samples = append(open.Samples, prom.Sample{Labels: []string{"status", st.status}, Value: float64(st.n)})
			}
			return []prom.Family{
				prom.GaugeSample("countersign_store_stats_up", upHelp, 1),
				open,
				prom.GaugeSample("countersign_approvals_expiring_soon", expiringHelp, float64(s.ExpiringSoon)),
				prom.GaugeSample("countersign_queue_depth", depthHelp, float64(s.QueueDepth)),
				prom.GaugeSample("countersign_queue_oldest_task_age_seconds", oldestHelp, s.OldestTask.Seconds()),
				prom.GaugeSample("countersign_stuck_executions", stuckHelp, float64(s.Stuck)),
			}
		},
	})
}
