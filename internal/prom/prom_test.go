package prom_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/countersign/countersign/internal/prom"
)

// parse reads an exposition with Prometheus's own text parser, which
// refuses a malformed line, a sample before its TYPE, a family twice, or
// a histogram without its +Inf bucket.
func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Prometheus's parser refuses the exposition: %v\n%s", err, text)
	}
	return fams
}

// What the registry serves is read by Prometheus's parser as written:
// counters, gauges and histograms with labels (escaped), sorted, with
// cumulative buckets.
func TestExpositionParsesAsWritten(t *testing.T) {
	reg := prom.NewRegistry()
	c := prom.NewCounterVec("test_events_total", "Events,\nby kind \\ outcome.", "kind", "outcome")
	g := prom.NewGaugeVec("test_build_info", "Always 1.", "version")
	h := prom.NewHistogramVec("test_duration_seconds", "Durations.", []float64{1, 0.1, 10}, "route")
	reg.MustRegister(c, g, h)
	c.WithLabelValues(`quote " and \ back`, "ok").Inc()
	c.WithLabelValues("b", "ok").Add(2.5)
	c.WithLabelValues("a", "failed").Inc()
	g.WithLabelValues("v1").Set(1)
	for _, v := range []float64{0.05, 0.1, 0.5, 3, 30} {
		h.WithLabelValues("/x").Observe(v)
	}
	text := reg.Text()
	fams := parse(t, text)

	ev := fams["test_events_total"]
	if ev == nil || ev.GetType() != dto.MetricType_COUNTER || ev.GetHelp() != "Events,\nby kind \\ outcome." || len(ev.Metric) != 3 {
		t.Fatalf("counter family: %v", ev)
	}
	got := map[string]float64{}
	for _, m := range ev.Metric {
		got[m.Label[0].GetValue()+"/"+m.Label[1].GetValue()] = m.GetCounter().GetValue()
	}
	if got[`quote " and \ back/ok`] != 1 || got["b/ok"] != 2.5 || got["a/failed"] != 1 {
		t.Errorf("counter values: %v", got)
	}
	if i, j := strings.Index(text, `kind="a"`), strings.Index(text, `kind="b"`); i < 0 || j < i {
		t.Errorf("series not sorted by label values:\n%s", text)
	}
	if b := fams["test_build_info"]; b == nil || b.GetType() != dto.MetricType_GAUGE || b.Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("gauge family: %v", b)
	}
	hf := fams["test_duration_seconds"]
	if hf == nil || hf.GetType() != dto.MetricType_HISTOGRAM || len(hf.Metric) != 1 {
		t.Fatalf("histogram family: %v", hf)
	}
	hist := hf.Metric[0].GetHistogram()
	if hist.GetSampleCount() != 5 || hist.GetSampleSum() != 33.65 {
		t.Errorf("histogram count %d sum %v", hist.GetSampleCount(), hist.GetSampleSum())
	}
	var buckets []string
	for _, b := range hist.Bucket {
		buckets = append(buckets, prom.FormatFloat(b.GetUpperBound())+":"+prom.FormatFloat(float64(b.GetCumulativeCount())))
	}
	// 0.1 falls in the 0.1 bucket (le is "less or equal").
	if strings.Join(buckets, " ") != "0.1:2 1:3 10:4 +Inf:5" {
		t.Errorf("buckets %v", buckets)
	}
	if !strings.Contains(text, `test_duration_seconds_bucket{route="/x",le="+Inf"} 5`) {
		t.Errorf("no +Inf bucket:\n%s", text)
	}
	if err := reg.Register(prom.NewCounterVec("test_events_total", "again")); err == nil {
		t.Error("a name registered twice was accepted")
	}
	if err := reg.Register(prom.NewCounterVec("test-bad", "bad")); err == nil {
		t.Error("an invalid name was accepted")
	}
}

// A vector with no series yet is not served (as client_golang does), and
// the handler serves the text format's media type.
func TestHandler(t *testing.T) {
	reg := prom.NewRegistry()
	reg.MustRegister(prom.NewCounterVec("test_unused_total", "Never counted.", "kind"))
	g := prom.NewGaugeVec("test_up", "Up.")
	g.WithLabelValues().Set(0)
	reg.MustRegister(g)
	srv := httptest.NewServer(reg)
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != prom.ContentType {
		t.Errorf("Content-Type %q", ct)
	}
	if want := "# HELP test_up Up.\n# TYPE test_up gauge\ntest_up 0\n"; string(body) != want {
		t.Errorf("served %q, want %q", body, want)
	}
}

// The Go and process collectors serve the families client_golang's
// default collectors serve, under the same names and types, so
// dashboards built on client_golang read the same series.
func TestRuntimeCollectorsMatchClientGolang(t *testing.T) {
	ref := prometheus.NewRegistry()
	ref.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	want, err := ref.Gather()
	if err != nil {
		t.Fatal(err)
	}
	reg := prom.NewRegistry()
	reg.MustRegister(prom.GoCollector(), prom.ProcessCollector())
	got := parse(t, reg.Text())
	var missing []string
	for _, f := range want {
		g := got[f.GetName()]
		switch {
		case g == nil:
			missing = append(missing, f.GetName())
		case g.GetType() != f.GetType():
			t.Errorf("%s is a %v, client_golang's a %v", f.GetName(), g.GetType(), f.GetType())
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("families client_golang serves and prom does not: %v", missing)
	}
	if len(got) != len(want) {
		t.Errorf("prom serves %d families, client_golang %d", len(got), len(want))
	}
	for _, name := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "go_goroutines", "go_memstats_heap_alloc_bytes"} {
		if f := got[name]; f == nil || value(f.Metric[0]) <= 0 {
			t.Errorf("%s is not positive: %v", name, f)
		}
	}
	// The process's start time and RSS agree with client_golang's reading.
	for _, name := range []string{"process_start_time_seconds", "process_max_fds"} {
		var w float64
		for _, f := range want {
			if f.GetName() == name {
				w = value(f.Metric[0])
			}
		}
		if g := got[name]; g == nil || abs(value(g.Metric[0])-w) > 1 {
			t.Errorf("%s = %v, client_golang reads %v", name, g, w)
		}
	}
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
