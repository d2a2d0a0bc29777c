package telemetry

import (
	"context"
	"encoding/hex"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testing/otlptest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Spans of every shape reach a collector that decodes them strictly
// against the OTLP protobuf definitions, with the service's resource, the
// configured headers, gzip, and every attribute type intact.
func TestOTLPJSONExport(t *testing.T) {
	col := otlptest.Start(t)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test") // the SDK reads the process's own
	tr, err := TracingFromEnv(context.Background(), envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":    col.URL + "/",
		"OTEL_EXPORTER_OTLP_HEADERS":     "authorization=Bearer%20tok,x-tenant=a",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
	}), "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Endpoint != col.URL+"/v1/traces" {
		t.Errorf("endpoint = %q", tr.Endpoint)
	}
	ctx, parent := tr.Provider.Tracer(TracerName).Start(context.Background(), "parent", trace.WithSpanKind(trace.SpanKindServer))
	linked := parent.SpanContext()
	_, child := tr.Provider.Tracer(TracerName).Start(ctx, "child", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("why", "retry")}}))
	child.SetAttributes(
		attribute.String("s", "x"), attribute.Bool("b", true), attribute.Int64("i", -1<<62),
		attribute.Float64("f", 1.5), attribute.Float64("nan", math.NaN()),
		attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.BoolSlice("bs", []bool{false}), attribute.Float64Slice("fs", []float64{0.25}),
	)
	child.AddEvent("retrying", trace.WithAttributes(attribute.Int("attempt", 2)))
	child.SetStatus(codes.Error, "stale_state")
	child.End()
	parent.SetStatus(codes.Ok, "")
	parent.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	reqs := col.Requests()
	if len(reqs) != 1 {
		t.Fatalf("collector accepted %d exports, want 1", len(reqs))
	}
	h := col.Headers()[0]
	if h.Get("Authorization") != "Bearer tok" || h.Get("X-Tenant") != "a" || h.Get("Content-Encoding") != "gzip" {
		t.Errorf("headers = %v", h)
	}
	rs := reqs[0].ResourceSpans
	if len(rs) != 1 || len(rs[0].ScopeSpans) != 1 || rs[0].ScopeSpans[0].Scope.Name != TracerName {
		t.Fatalf("resource/scope grouping: %v", reqs[0])
	}
	res := attrMap(rs[0].Resource.Attributes)
	if res["service.name"].GetStringValue() != "countersign" || res["service.version"].GetStringValue() != "v1.2.3" ||
		res["deployment.environment"].GetStringValue() != "test" {
		t.Errorf("resource = %v", rs[0].Resource.Attributes)
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range rs[0].ScopeSpans[0].Spans {
		byName[s.Name] = s
	}
	p, c := byName["parent"], byName["child"]
	if p == nil || c == nil {
		t.Fatalf("spans = %v", byName)
	}
	pid := parent.SpanContext().SpanID()
	tid := parent.SpanContext().TraceID()
	if !bytesEq(c.ParentSpanId, pid[:]) || !bytesEq(c.TraceId, tid[:]) || !bytesEq(p.SpanId, pid[:]) || len(p.ParentSpanId) != 0 {
		t.Errorf("ids: parent %x/%x child %x parent-of-child %x", p.TraceId, p.SpanId, c.TraceId, c.ParentSpanId)
	}
	if p.Kind != tracepb.Span_SPAN_KIND_SERVER || c.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("kinds = %v, %v", p.Kind, c.Kind)
	}
	if p.Status.GetCode() != tracepb.Status_STATUS_CODE_OK ||
		c.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || c.Status.GetMessage() != "stale_state" {
		t.Errorf("status: parent %v child %v", p.Status, c.Status)
	}
	if c.StartTimeUnixNano == 0 || c.EndTimeUnixNano < c.StartTimeUnixNano {
		t.Errorf("times %d..%d", c.StartTimeUnixNano, c.EndTimeUnixNano)
	}
	if c.Flags&0xff != 1 || c.Flags&0x100 == 0 || c.Flags&0x200 != 0 {
		t.Errorf("flags = %#x, want sampled, parent known local", c.Flags)
	}
	a := attrMap(c.Attributes)
	if a["s"].GetStringValue() != "x" || !a["b"].GetBoolValue() || a["i"].GetIntValue() != -1<<62 ||
		a["f"].GetDoubleValue() != 1.5 || !math.IsNaN(a["nan"].GetDoubleValue()) ||
		len(a["ss"].GetArrayValue().GetValues()) != 2 || a["is"].GetArrayValue().GetValues()[1].GetIntValue() != 2 ||
		a["bs"].GetArrayValue().GetValues()[0].GetBoolValue() || a["fs"].GetArrayValue().GetValues()[0].GetDoubleValue() != 0.25 {
		t.Errorf("attributes = %v", c.Attributes)
	}
	if len(c.Events) != 1 || c.Events[0].Name != "retrying" || attrMap(c.Events[0].Attributes)["attempt"].GetIntValue() != 2 {
		t.Errorf("events = %v", c.Events)
	}
	if len(c.Links) != 1 || !bytesEq(c.Links[0].SpanId, pid[:]) || attrMap(c.Links[0].Attributes)["why"].GetStringValue() != "retry" {
		t.Errorf("links = %v", c.Links)
	}
}

// A collector that is briefly unavailable gets the batch again; one that
// refuses it (400) does not, and the error names neither the endpoint's
// credentials nor the headers.
func TestOTLPJSONRetries(t *testing.T) {
	col := otlptest.Start(t)
	exp, err := otlpExporterFromEnv(col.URL+"/v1/traces", func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_TRACES_HEADERS" {
			return "authorization=secret-token"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	_, s := tp.Tracer("t").Start(context.Background(), "op")
	s.End()
	span := s.(sdktrace.ReadOnlySpan)

	col.FailNext(http.StatusServiceUnavailable, http.StatusTooManyRequests)
	if err := exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{span}); err != nil {
		t.Fatalf("export after two retryable failures: %v", err)
	}
	if n := len(col.Requests()); n != 1 {
		t.Fatalf("accepted %d exports, want 1", n)
	}
	col.FailNext(http.StatusBadRequest)
	err = exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{span})
	if err == nil || !strings.Contains(err.Error(), "400") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("export refused with 400: err = %v", err)
	}
	if n := len(col.Requests()); n != 1 {
		t.Errorf("a refused batch was sent again: %d exports", n)
	}
	_ = exp.Shutdown(context.Background())
	if err := exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{span}); err != nil || len(col.Requests()) != 1 {
		t.Errorf("export after shutdown: %v, %d exports", err, len(col.Requests()))
	}
}

// Settings the exporter cannot honour stop the start, naming the variable
// but not a header's (possibly secret) value.
func TestOTLPJSONBadSettings(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"protocol":    {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"headers":     {"OTEL_EXPORTER_OTLP_HEADERS": "secret-token-without-key"},
		"timeout":     {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "soon"},
		"compression": {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
		"certificate": {"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"},
		"client pair": {"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/x.pem"},
		"endpoint":    {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
	} {
		env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://127.0.0.1:1/v1/traces"
		if name == "endpoint" {
			delete(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
		}
		_, err := TracingFromEnv(context.Background(), envOf(env), "v")
		if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_") || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func attrMap(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func bytesEq(a, b []byte) bool { return hex.EncodeToString(a) == hex.EncodeToString(b) && len(a) > 0 }
