package telemetry

import (
	"context"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/prometheus/client_golang/prometheus"
)

// StatsSource is what the gauges read at each scrape (store.Redis).
type StatsSource interface {
	Stats(ctx context.Context, principals []string, now time.Time, horizon time.Duration) (store.Stats, error)
}

// ExpiringHorizon is how soon an approval window must end for the
// operation to count in countersign_approvals_expiring_soon.
const ExpiringHorizon = 15 * time.Minute

// gauges reads the store's counts when Prometheus scrapes, so they are
// the store's (shared by every replica), never one process's view.
type gauges struct {
	src        StatsSource
	principals func() []string
	now        func() time.Time
	open       *prometheus.Desc
	expiring   *prometheus.Desc
	depth      *prometheus.Desc
	oldest     *prometheus.Desc
	stuck      *prometheus.Desc
	up         *prometheus.Desc
}

// RegisterGauges adds the store's gauges to reg: operations open by status,
// approvals about to expire, and the work queue's depth and oldest task.
// principals lists the principals whose operations are counted.
func RegisterGauges(reg prometheus.Registerer, src StatsSource, principals func() []string, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	return reg.Register(&gauges{
		src: src, principals: principals, now: now,
		open: prometheus.NewDesc("countersign_operations_open",
			"Operations not yet ended, by status (draft, pending_approval, approved, executing), across every replica.",
			[]string{"status"}, nil),
		expiring: prometheus.NewDesc("countersign_approvals_expiring_soon",
			"Pending operations whose approval window ends within 15 minutes (counted up to 500 per shard).", nil, nil),
		depth: prometheus.NewDesc("countersign_queue_depth",
			"Worker tasks queued or in progress, on every shard.", nil, nil),
		oldest: prometheus.NewDesc("countersign_queue_oldest_task_age_seconds",
			"Age of the oldest worker task queued or in progress (0 when the queue is empty).", nil, nil),
		stuck: prometheus.NewDesc("countersign_stuck_executions",
			"Operations executing for longer than the stuck threshold (5m, as ops list --stuck): a human must settle them (ops reconcile).", nil, nil),
		up: prometheus.NewDesc("countersign_store_stats_up",
			"1 if the store answered the reads behind the gauges at this scrape, 0 if not.", nil, nil),
	})
}

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.open, g.expiring, g.depth, g.oldest, g.stuck, g.up} {
		ch <- d
	}
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := g.src.Stats(ctx, g.principals(), g.now(), ExpiringHorizon)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(g.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(g.up, prometheus.GaugeValue, 1)
	for status, n := range map[string]int64{"draft": s.Drafts, "pending_approval": s.Pending,
		"approved": s.Approved, "executing": s.Executing} {
		ch <- prometheus.MustNewConstMetric(g.open, prometheus.GaugeValue, float64(n), status)
	}
	ch <- prometheus.MustNewConstMetric(g.expiring, prometheus.GaugeValue, float64(s.ExpiringSoon))
	ch <- prometheus.MustNewConstMetric(g.depth, prometheus.GaugeValue, float64(s.QueueDepth))
	ch <- prometheus.MustNewConstMetric(g.oldest, prometheus.GaugeValue, s.OldestTask.Seconds())
	ch <- prometheus.MustNewConstMetric(g.stuck, prometheus.GaugeValue, float64(s.Stuck))
}
