package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerName is the instrumentation scope of countersign's spans.
const TracerName = "github.com/countersign/countersign"

func tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(TracerName)
}

// Tracing is the tracer provider of a running service and how to stop it.
type Tracing struct {
	Provider trace.TracerProvider
	// Endpoint is where spans are exported ("" when tracing is off).
	Endpoint string
	shutdown func(context.Context) error
}

// Shutdown flushes the spans not yet exported and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// TracingFromEnv exports spans over OTLP/HTTP (JSON encoding) when
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (with /v1/traces appended) is set, as the
// OpenTelemetry specification says; otherwise tracing is off and costs
// nothing. OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the
// service (default countersign), OTEL_TRACES_SAMPLER picks the sampler
// (default: parent-based, always on), and the exporter reads
// OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE and
// _CLIENT_CERTIFICATE/_CLIENT_KEY (each also in its _TRACES_ form).
func TracingFromEnv(ctx context.Context, env func(string) (string, bool), version string) (*Tracing, error) {
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	endpoint := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		if base := get("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
			endpoint = strings.TrimRight(base, "/") + "/v1/traces"
		}
	}
	if endpoint == "" || strings.EqualFold(get("OTEL_TRACES_EXPORTER"), "none") {
		return &Tracing{Provider: noop.NewTracerProvider()}, nil
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %q is not an http:// or https:// URL", endpoint)
	}
	exp, err := otlpExporterFromEnv(endpoint, get)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "countersign"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{Provider: tp, Endpoint: endpoint, shutdown: tp.Shutdown}, nil
}
