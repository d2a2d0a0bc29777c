// Package prom is the small part of a Prometheus client countersign needs:
// counters, gauges and histograms with labels, collectors read at each
// scrape, the Go runtime's and the process's standard metrics, and the
// text exposition format (version 0.0.4) every Prometheus server reads.
//
// It replaces github.com/prometheus/client_golang, whose data model is
// generated protobuf code: that linked google.golang.org/protobuf (29
// packages, 2.3 MB of the stripped binary) for metrics that are only ever
// served as text. Names, types and output follow client_golang's, so
// dashboards and alerts read the same series; the tests parse what it
// writes with Prometheus's own text parser.
package prom

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Metric types, as the exposition format names them.
const (
	counterType   = "counter"
	gaugeType     = "gauge"
	histogramType = "histogram"
	summaryType   = "summary"
)

// A Family is one metric name's help, type and samples at one scrape.
type Family struct {
	Name, Help, Type string
	Samples          []Sample
}

// A Sample is one line of a family: its name suffix (_bucket, _sum,
// _count, or ""), its labels as name/value pairs, and its value.
type Sample struct {
	Suffix string
	Labels []string
	Value  float64
}

// A Collector is what a Registry reads at each scrape.
type Collector interface {
	// Names are the metric names the collector writes, fixed for its life.
	Names() []string
	// Collect returns the collector's families now.
	Collect() []Family
}

// A Registry holds collectors and writes their metrics.
type Registry struct {
	mu         sync.Mutex
	names      map[string]bool
	collectors []Collector
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]bool{}} }

// Register adds c; a metric name registered twice is an error.
func (r *Registry) Register(c Collector) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range c.Names() {
		if !validName(n) {
			return fmt.Errorf("prom: invalid metric name %q", n)
		}
		if r.names[n] {
			return fmt.Errorf("prom: metric %s registered twice", n)
		}
	}
	for _, n := range c.Names() {
		r.names[n] = true
	}
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister registers each collector, panicking on an error.
func (r *Registry) MustRegister(cs ...Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Gather returns the families of every collector, sorted by name; with
// names, only the families named.
func (r *Registry) Gather(names ...string) []Family {
	r.mu.Lock()
	cs := append([]Collector(nil), r.collectors...)
	r.mu.Unlock()
	var out []Family
	for _, c := range cs {
		for _, f := range c.Collect() {
			if len(names) > 0 && !contains(names, f.Name) {
				continue
			}
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Text is the exposition of the named families (all with none).
func (r *Registry) Text(names ...string) string {
	var b bytes.Buffer
	_ = Write(&b, r.Gather(names...))
	return b.String()
}

// ContentType is the text exposition format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// ServeHTTP serves the registry's metrics in the text format.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", ContentType)
	_ = Write(w, r.Gather())
}

// Write writes families in the text exposition format; a family with no
// samples (a vector with no series yet) is left out, as client_golang does.
func Write(w io.Writer, fams []Family) error {
	var b bytes.Buffer
	for _, f := range fams {
		if len(f.Samples) == 0 {
			continue
		}
		b.WriteString("# HELP ")
		b.WriteString(f.Name)
		b.WriteByte(' ')
		b.WriteString(escapeHelp(f.Help))
		b.WriteString("\n# TYPE ")
		b.WriteString(f.Name)
		b.WriteByte(' ')
		b.WriteString(f.Type)
		b.WriteByte('\n')
		for _, s := range f.Samples {
			b.WriteString(f.Name)
			b.WriteString(s.Suffix)
			if len(s.Labels) > 0 {
				b.WriteByte('{')
				for i := 0; i+1 < len(s.Labels); i += 2 {
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(s.Labels[i])
					b.WriteString(`="`)
					b.WriteString(escapeLabel(s.Labels[i+1]))
					b.WriteByte('"')
				}
				b.WriteByte('}')
			}
			b.WriteByte(' ')
			b.WriteString(FormatFloat(s.Value))
			b.WriteByte('\n')
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// FormatFloat writes a value as Prometheus does.
func FormatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func validName(n string) bool {
	if n == "" {
		return false
	}
	for i, c := range n {
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// sortedPairs zips names and values sorted by label name, as the format
// writes them.
func sortedPairs(names, values []string) []string {
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(i, j int) bool { return names[idx[i]] < names[idx[j]] })
	out := make([]string, 0, 2*len(names))
	for _, i := range idx {
		out = append(out, names[i], values[i])
	}
	return out
}

// atomicFloat is a float64 updated without a lock.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) add(v float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}
func (f *atomicFloat) set(v float64) { f.bits.Store(math.Float64bits(v)) }
func (f *atomicFloat) get() float64  { return math.Float64frombits(f.bits.Load()) }
