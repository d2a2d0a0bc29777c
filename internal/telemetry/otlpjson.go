package telemetry

// A hand-written OTLP/HTTP trace exporter using the JSON encoding. The
// official otlptracehttp exporter links the generated protobuf types,
// which pull in gRPC, grpc-gateway and genproto (over 100 packages) even
// when nothing speaks gRPC; every OTLP/HTTP receiver also accepts
// application/json, so a few hundred lines here replace all of it.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// otlpExporter posts spans to an OTLP/HTTP endpoint as JSON.
type otlpExporter struct {
	endpoint string
	headers  http.Header
	gzip     bool
	timeout  time.Duration
	client   *http.Client

	mu     sync.Mutex
	closed bool
}

// otlpExporterFromEnv reads the standard OTEL_EXPORTER_OTLP_* settings
// (the _TRACES_ form first): headers, timeout, compression, certificate
// and client certificate. Any setting it cannot use is an error at start.
func otlpExporterFromEnv(endpoint string, get func(string) string) (*otlpExporter, error) {
	pick := func(suffix string) (string, string) {
		if v := get("OTEL_EXPORTER_OTLP_TRACES_" + suffix); v != "" {
			return "OTEL_EXPORTER_OTLP_TRACES_" + suffix, v
		}
		return "OTEL_EXPORTER_OTLP_" + suffix, get("OTEL_EXPORTER_OTLP_" + suffix)
	}
	e := &otlpExporter{endpoint: endpoint, headers: http.Header{}, timeout: 10 * time.Second}
	if name, v := pick("PROTOCOL"); v != "" && v != "http/json" && v != "http/protobuf" {
		return nil, fmt.Errorf("%s: %q is not supported; countersign exports over OTLP/HTTP (http/json)", name, v)
	}
	if name, v := pick("HEADERS"); v != "" {
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			dec, err := url.PathUnescape(strings.TrimSpace(val))
			if !ok || k == "" || err != nil {
				// The value may be a credential: name the variable, not its content.
				return nil, fmt.Errorf("%s: not a comma-separated list of key=value", name)
			}
			e.headers.Add(k, dec)
		}
	}
	if name, v := pick("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive number of milliseconds", name, v)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch name, v := pick("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		e.gzip = true
	default:
		return nil, fmt.Errorf("%s: %q is not gzip or none", name, v)
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second}
	if name, v := pick("CERTIFICATE"); v != "" {
		pem, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", name, v)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	certName, cert := pick("CLIENT_CERTIFICATE")
	keyName, key := pick("CLIENT_KEY")
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%s and %s: set both or neither", certName, keyName)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", certName, keyName, err)
		}
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.Certificates = []tls.Certificate{pair}
	}
	e.client = &http.Client{Transport: tr}
	return e, nil
}

// ExportSpans sends one batch, retrying what OTLP calls retryable (429,
// 502, 503, 504 and connection failures) a few times within ctx.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed || len(spans) == 0 {
		return nil
	}
	body, err := json.Marshal(encodeSpans(spans))
	if err != nil {
		return fmt.Errorf("otlp: encode: %w", err)
	}
	if e.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		retry, err := e.post(ctx, body)
		if err == nil || !retry || attempt == 4 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

func (e *otlpExporter) post(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("otlp: %w", err)
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// url.Error names the endpoint, which may carry credentials.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return true, fmt.Errorf("otlp: export: %w", err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		var out struct {
			PartialSuccess struct {
				RejectedSpans json.Number `json:"rejectedSpans"`
			} `json:"partialSuccess"`
		}
		if json.Unmarshal(reply, &out) == nil && out.PartialSuccess.RejectedSpans != "" && out.PartialSuccess.RejectedSpans != "0" {
			return false, fmt.Errorf("otlp: collector rejected %s spans", out.PartialSuccess.RejectedSpans)
		}
		return false, nil
	case resp.StatusCode == 429, resp.StatusCode == 502, resp.StatusCode == 503, resp.StatusCode == 504:
		return true, fmt.Errorf("otlp: collector answered %d", resp.StatusCode)
	default:
		return false, fmt.Errorf("otlp: collector answered %d", resp.StatusCode)
	}
}

// Shutdown stops further exports; the batcher has flushed before calling it.
func (e *otlpExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return nil
}

// The JSON shapes of opentelemetry/proto/collector/trace/v1. OTLP's JSON
// differs from the proto3 mapping in two ways: trace and span ids are hex,
// and enums are integers. 64-bit integers are strings, as in proto3 JSON.
type (
	otlpRequest struct {
		ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	}
	otlpResourceSpans struct {
		Resource   otlpResource     `json:"resource"`
		ScopeSpans []otlpScopeSpans `json:"scopeSpans"`
		SchemaURL  string           `json:"schemaUrl,omitempty"`
	}
	otlpResource struct {
		Attributes []otlpKeyValue `json:"attributes,omitempty"`
	}
	otlpScopeSpans struct {
		Scope     otlpScope  `json:"scope"`
		Spans     []otlpSpan `json:"spans"`
		SchemaURL string     `json:"schemaUrl,omitempty"`
	}
	otlpScope struct {
		Name       string         `json:"name,omitempty"`
		Version    string         `json:"version,omitempty"`
		Attributes []otlpKeyValue `json:"attributes,omitempty"`
	}
	otlpSpan struct {
		TraceID                string         `json:"traceId"`
		SpanID                 string         `json:"spanId"`
		TraceState             string         `json:"traceState,omitempty"`
		ParentSpanID           string         `json:"parentSpanId,omitempty"`
		Flags                  uint32         `json:"flags,omitempty"`
		Name                   string         `json:"name"`
		Kind                   int            `json:"kind"`
		StartTimeUnixNano      string         `json:"startTimeUnixNano"`
		EndTimeUnixNano        string         `json:"endTimeUnixNano"`
		Attributes             []otlpKeyValue `json:"attributes,omitempty"`
		DroppedAttributesCount int            `json:"droppedAttributesCount,omitempty"`
		Events                 []otlpEvent    `json:"events,omitempty"`
		DroppedEventsCount     int            `json:"droppedEventsCount,omitempty"`
		Links                  []otlpLink     `json:"links,omitempty"`
		DroppedLinksCount      int            `json:"droppedLinksCount,omitempty"`
		Status                 otlpStatus     `json:"status"`
	}
	otlpEvent struct {
		TimeUnixNano           string         `json:"timeUnixNano"`
		Name                   string         `json:"name"`
		Attributes             []otlpKeyValue `json:"attributes,omitempty"`
		DroppedAttributesCount int            `json:"droppedAttributesCount,omitempty"`
	}
	otlpLink struct {
		TraceID                string         `json:"traceId"`
		SpanID                 string         `json:"spanId"`
		TraceState             string         `json:"traceState,omitempty"`
		Attributes             []otlpKeyValue `json:"attributes,omitempty"`
		DroppedAttributesCount int            `json:"droppedAttributesCount,omitempty"`
		Flags                  uint32         `json:"flags,omitempty"`
	}
	otlpStatus struct {
		Message string `json:"message,omitempty"`
		Code    int    `json:"code,omitempty"`
	}
	otlpKeyValue struct {
		Key   string       `json:"key"`
		Value otlpAnyValue `json:"value"`
	}
	otlpAnyValue struct {
		StringValue *string     `json:"stringValue,omitempty"`
		BoolValue   *bool       `json:"boolValue,omitempty"`
		IntValue    string      `json:"intValue,omitempty"`
		DoubleValue any         `json:"doubleValue,omitempty"`
		ArrayValue  *otlpArray  `json:"arrayValue,omitempty"`
		KvlistValue *otlpKvlist `json:"kvlistValue,omitempty"`
		BytesValue  []byte      `json:"bytesValue,omitempty"` // base64, as proto3 JSON
	}
	otlpKvlist struct {
		Values []otlpKeyValue `json:"values"`
	}
	otlpArray struct {
		Values []otlpAnyValue `json:"values"`
	}
)

// encodeSpans groups spans by resource and instrumentation scope, as an
// ExportTraceServiceRequest does.
func encodeSpans(spans []sdktrace.ReadOnlySpan) otlpRequest {
	var req otlpRequest
	type scopeKey struct{ name, version, schema string }
	type resKey struct {
		attrs  attribute.Distinct
		schema string
	}
	resIdx := map[resKey]int{}
	scopeIdx := map[resKey]map[scopeKey]int{}
	for _, s := range spans {
		res := s.Resource()
		rk := resKey{res.Equivalent(), res.SchemaURL()}
		ri, ok := resIdx[rk]
		if !ok {
			ri = len(req.ResourceSpans)
			resIdx[rk] = ri
			scopeIdx[rk] = map[scopeKey]int{}
			req.ResourceSpans = append(req.ResourceSpans, otlpResourceSpans{
				Resource:  otlpResource{Attributes: encodeAttrs(res.Attributes())},
				SchemaURL: res.SchemaURL(),
			})
		}
		sc := s.InstrumentationScope()
		sk := scopeKey{sc.Name, sc.Version, sc.SchemaURL}
		rs := &req.ResourceSpans[ri]
		si, ok := scopeIdx[rk][sk]
		if !ok {
			si = len(rs.ScopeSpans)
			scopeIdx[rk][sk] = si
			rs.ScopeSpans = append(rs.ScopeSpans, otlpScopeSpans{
				Scope:     otlpScope{Name: sc.Name, Version: sc.Version, Attributes: encodeAttrs(sc.Attributes.ToSlice())},
				SchemaURL: sc.SchemaURL,
			})
		}
		rs.ScopeSpans[si].Spans = append(rs.ScopeSpans[si].Spans, encodeSpan(s))
	}
	return req
}

// Span flags: the low byte is the W3C trace flags; bit 8 says whether
// bit 9 (the parent is remote) is known.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// spanFlags is own's trace flags and whether remote is remote.
func spanFlags(own, remote trace.SpanContext) uint32 {
	f := uint32(own.TraceFlags()) | flagHasIsRemote
	if remote.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

func encodeSpan(s sdktrace.ReadOnlySpan) otlpSpan {
	sc := s.SpanContext()
	out := otlpSpan{
		TraceID:                sc.TraceID().String(), // hex
		SpanID:                 sc.SpanID().String(),
		TraceState:             sc.TraceState().String(),
		Flags:                  spanFlags(sc, s.Parent()),
		Name:                   s.Name(),
		Kind:                   int(s.SpanKind()), // the SDK's numbering is OTLP's
		StartTimeUnixNano:      unixNano(s.StartTime()),
		EndTimeUnixNano:        unixNano(s.EndTime()),
		Attributes:             encodeAttrs(s.Attributes()),
		DroppedAttributesCount: s.DroppedAttributes(),
		DroppedEventsCount:     s.DroppedEvents(),
		DroppedLinksCount:      s.DroppedLinks(),
	}
	if p := s.Parent(); p.SpanID().IsValid() {
		out.ParentSpanID = p.SpanID().String()
	}
	for _, ev := range s.Events() {
		out.Events = append(out.Events, otlpEvent{
			TimeUnixNano: unixNano(ev.Time), Name: ev.Name,
			Attributes: encodeAttrs(ev.Attributes), DroppedAttributesCount: ev.DroppedAttributeCount,
		})
	}
	for _, l := range s.Links() {
		out.Links = append(out.Links, otlpLink{
			TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String(),
			TraceState: l.SpanContext.TraceState().String(), Flags: spanFlags(l.SpanContext, l.SpanContext),
			Attributes: encodeAttrs(l.Attributes), DroppedAttributesCount: l.DroppedAttributeCount,
		})
	}
	st := s.Status()
	switch st.Code {
	case codes.Error: // OTLP: STATUS_CODE_ERROR = 2 (the SDK's Error is 1)
		out.Status = otlpStatus{Code: 2, Message: st.Description}
	case codes.Ok:
		out.Status = otlpStatus{Code: 1}
	}
	return out
}

func unixNano(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func encodeAttrs(kvs []attribute.KeyValue) []otlpKeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]otlpKeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, otlpKeyValue{Key: string(kv.Key), Value: encodeValue(kv.Value)})
	}
	return out
}

func encodeValue(v attribute.Value) otlpAnyValue {
	str := func(s string) otlpAnyValue { return otlpAnyValue{StringValue: &s} }
	boolean := func(b bool) otlpAnyValue { return otlpAnyValue{BoolValue: &b} }
	integer := func(i int64) otlpAnyValue { return otlpAnyValue{IntValue: strconv.FormatInt(i, 10)} }
	double := func(f float64) otlpAnyValue {
		// proto3 JSON spells the non-finite doubles as strings.
		switch {
		case math.IsNaN(f):
			return otlpAnyValue{DoubleValue: "NaN"}
		case math.IsInf(f, 1):
			return otlpAnyValue{DoubleValue: "Infinity"}
		case math.IsInf(f, -1):
			return otlpAnyValue{DoubleValue: "-Infinity"}
		}
		return otlpAnyValue{DoubleValue: json.Number(strconv.FormatFloat(f, 'g', -1, 64))}
	}
	switch v.Type() {
	case attribute.BOOL:
		return boolean(v.AsBool())
	case attribute.INT64:
		return integer(v.AsInt64())
	case attribute.FLOAT64:
		return double(v.AsFloat64())
	case attribute.STRING:
		return str(v.AsString())
	case attribute.BOOLSLICE:
		return arrayOf(v.AsBoolSlice(), boolean)
	case attribute.INT64SLICE:
		return arrayOf(v.AsInt64Slice(), integer)
	case attribute.FLOAT64SLICE:
		return arrayOf(v.AsFloat64Slice(), double)
	case attribute.STRINGSLICE:
		return arrayOf(v.AsStringSlice(), str)
	case attribute.BYTESLICE:
		b := v.AsByteSlice()
		if b == nil {
			b = []byte{}
		}
		return otlpAnyValue{BytesValue: b}
	case attribute.SLICE:
		return arrayOf(v.AsSlice(), encodeValue)
	case attribute.MAP:
		kvs := encodeAttrs(v.AsMap())
		if kvs == nil {
			kvs = []otlpKeyValue{}
		}
		return otlpAnyValue{KvlistValue: &otlpKvlist{Values: kvs}}
	}
	return str(v.Emit())
}

// arrayOf encodes each element of a slice attribute with enc.
func arrayOf[T any](elems []T, enc func(T) otlpAnyValue) otlpAnyValue {
	vals := make([]otlpAnyValue, 0, len(elems))
	for _, e := range elems {
		vals = append(vals, enc(e))
	}
	return otlpAnyValue{ArrayValue: &otlpArray{Values: vals}}
}
