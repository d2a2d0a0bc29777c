package prom

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

// vec is a metric's series by label values.
type vec[T any] struct {
	name, help string
	labels     []string
	mu         sync.RWMutex
	series     map[string]*T
	values     map[string][]string
	make       func() *T
}

func newVec[T any](name, help string, labels []string, mk func() *T) vec[T] {
	return vec[T]{name: name, help: help, labels: labels, series: map[string]*T{}, values: map[string][]string{}, make: mk}
}

// with is the series of these label values, made on first use.
func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("prom: %s has %d labels, got %d values", v.name, len(v.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	v.mu.RLock()
	s := v.series[key]
	v.mu.RUnlock()
	if s != nil {
		return s
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s = v.series[key]; s == nil {
		s = v.make()
		v.series[key] = s
		v.values[key] = append([]string(nil), values...)
	}
	return s
}

// each calls f for every series, ordered by their labels (sorted by name)
// as client_golang orders them, with the labels as sorted pairs.
func (v *vec[T]) each(f func(labels []string, s *T)) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	type series struct {
		labels []string
		s      *T
	}
	all := make([]series, 0, len(v.series))
	for k, s := range v.series {
		all = append(all, series{sortedPairs(v.labels, v.values[k]), s})
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i].labels, all[j].labels
		for k := 1; k < len(a); k += 2 {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return false
	})
	for _, s := range all {
		f(s.labels, s.s)
	}
}

func (v *vec[T]) Names() []string { return []string{v.name} }

// A Counter only goes up.
type Counter struct{ v atomicFloat }

// Inc adds 1.
func (c *Counter) Inc() { c.v.add(1) }

// Add adds d, which must not be negative.
func (c *Counter) Add(d float64) {
	if d < 0 {
		panic("prom: a counter cannot decrease")
	}
	c.v.add(d)
}

// Value is the counter's value.
func (c *Counter) Value() float64 { return c.v.get() }

// A CounterVec is a counter by label values.
type CounterVec struct{ vec[Counter] }

// NewCounterVec returns a counter named name with these label names.
func NewCounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{newVec(name, help, labels, func() *Counter { return new(Counter) })}
}

// WithLabelValues is the counter of these label values.
func (c *CounterVec) WithLabelValues(values ...string) *Counter { return c.with(values) }

// Collect implements Collector.
func (c *CounterVec) Collect() []Family {
	f := Family{Name: c.name, Help: c.help, Type: counterType}
	c.each(func(l []string, s *Counter) { f.Samples = append(f.Samples, Sample{Labels: l, Value: s.Value()}) })
	return []Family{f}
}

// A Gauge goes up and down.
type Gauge struct{ v atomicFloat }

// Set sets the gauge.
func (g *Gauge) Set(v float64) { g.v.set(v) }

// Add adds d (which may be negative).
func (g *Gauge) Add(d float64) { g.v.add(d) }

// Value is the gauge's value.
func (g *Gauge) Value() float64 { return g.v.get() }

// A GaugeVec is a gauge by label values.
type GaugeVec struct{ vec[Gauge] }

// NewGaugeVec returns a gauge named name with these label names.
func NewGaugeVec(name, help string, labels ...string) *GaugeVec {
	return &GaugeVec{newVec(name, help, labels, func() *Gauge { return new(Gauge) })}
}

// WithLabelValues is the gauge of these label values.
func (g *GaugeVec) WithLabelValues(values ...string) *Gauge { return g.with(values) }

// Collect implements Collector.
func (g *GaugeVec) Collect() []Family {
	f := Family{Name: g.name, Help: g.help, Type: gaugeType}
	g.each(func(l []string, s *Gauge) { f.Samples = append(f.Samples, Sample{Labels: l, Value: s.Value()}) })
	return []Family{f}
}

// A Histogram counts observations in buckets.
type Histogram struct {
	upper  []float64 // sorted upper bounds, +Inf excluded
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	count  uint64
	sum    float64
}

// Observe adds one observation.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v) // the first bound >= v
	h.mu.Lock()
	h.counts[i]++
	h.count++
	h.sum += v
	h.mu.Unlock()
}

// A HistogramVec is a histogram by label values.
type HistogramVec struct {
	vec[Histogram]
	buckets []float64
}

// NewHistogramVec returns a histogram named name with these bucket upper
// bounds (sorted, +Inf added) and label names.
func NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	b := append([]float64(nil), buckets...)
	sort.Float64s(b)
	if n := len(b); n > 0 && math.IsInf(b[n-1], 1) {
		b = b[:n-1]
	}
	for _, l := range labels {
		if l == "le" {
			panic("prom: le is a histogram's own label")
		}
	}
	return &HistogramVec{vec: newVec(name, help, labels, func() *Histogram {
		return &Histogram{upper: b, counts: make([]uint64, len(b)+1)}
	}), buckets: b}
}

// WithLabelValues is the histogram of these label values.
func (h *HistogramVec) WithLabelValues(values ...string) *Histogram { return h.with(values) }

// Collect implements Collector.
func (h *HistogramVec) Collect() []Family {
	f := Family{Name: h.name, Help: h.help, Type: histogramType}
	h.each(func(l []string, s *Histogram) {
		s.mu.Lock()
		counts := append([]uint64(nil), s.counts...)
		count, sum := s.count, s.sum
		s.mu.Unlock()
		var cum uint64
		for i, c := range counts {
			cum += c
			le := math.Inf(1)
			if i < len(s.upper) {
				le = s.upper[i]
			}
			f.Samples = append(f.Samples, Sample{Suffix: "_bucket", Labels: withLabel(l, "le", FormatFloat(le)), Value: float64(cum)})
		}
		f.Samples = append(f.Samples,
			Sample{Suffix: "_sum", Labels: l, Value: sum},
			Sample{Suffix: "_count", Labels: l, Value: float64(count)})
	})
	return []Family{f}
}

// withLabel is labels with one more pair, last (as client_golang writes le).
func withLabel(labels []string, name, value string) []string {
	return append(append(make([]string, 0, len(labels)+2), labels...), name, value)
}

// CollectorFunc is a collector whose families are computed at each scrape.
type CollectorFunc struct {
	MetricNames []string
	Func        func() []Family
}

// Names implements Collector.
func (c CollectorFunc) Names() []string { return c.MetricNames }

// Collect implements Collector.
func (c CollectorFunc) Collect() []Family { return c.Func() }

// GaugeSample is a gauge family with one sample of these label pairs.
func GaugeSample(name, help string, v float64, labels ...string) Family {
	return Family{Name: name, Help: help, Type: gaugeType, Samples: []Sample{{Labels: labels, Value: v}}}
}

// CounterSample is a counter family with one sample of these label pairs.
func CounterSample(name, help string, v float64, labels ...string) Family {
	return Family{Name: name, Help: help, Type: counterType, Samples: []Sample{{Labels: labels, Value: v}}}
}
