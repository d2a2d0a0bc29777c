package main

import (
	"context"
	"net/url"

	"github.com/countersign/countersign/internal/telemetry"
)

// openTelemetry sets up tracing: the provider a test gave, or OTLP export
// when OTEL_EXPORTER_OTLP_ENDPOINT is set, or none.
func (m *Main) openTelemetry(ctx context.Context) error {
	if m.TracerProvider != nil {
		m.tracing = &telemetry.Tracing{Provider: m.TracerProvider}
		return nil
	}
	t, err := telemetry.TracingFromEnv(ctx, m.Env, buildVersion())
	if err != nil {
		return err
	}
	m.tracing = t
	if t.Endpoint != "" {
		m.log.Info("tracing: exporting spans over OTLP/HTTP", "endpoint", redactURL(t.Endpoint))
	}
	return nil
}

// redactURL is scheme://host/path of a URL, without credentials or query.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unreadable URL)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}
