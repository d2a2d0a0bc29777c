// Package otlptest is an OTLP/HTTP trace collector for tests: a real HTTP
// server that accepts only what a collector accepts (POST /v1/traces,
// application/json, optionally gzip) and decodes each export strictly
// against the official protobuf definitions.
package otlptest

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// Collector records the export requests it accepted.
type Collector struct {
	URL string // base URL; exports go to URL + "/v1/traces"

	mu       sync.Mutex
	requests []*coltracepb.ExportTraceServiceRequest
	headers  []http.Header
	// Fail, when set, answers the next requests with these statuses in turn.
	fail []int
}

// Start runs a collector until the test ends.
func Start(t testing.TB) *Collector {
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// FailNext makes the next len(statuses) exports fail with those statuses.
func (c *Collector) FailNext(statuses ...int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = append(c.fail, statuses...)
}

// Requests is every export accepted so far.
func (c *Collector) Requests() []*coltracepb.ExportTraceServiceRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*coltracepb.ExportTraceServiceRequest(nil), c.requests...)
}

// Headers is the request headers of every export accepted so far.
func (c *Collector) Headers() []http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]http.Header(nil), c.headers...)
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "not an OTLP/HTTP JSON trace export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	if len(c.fail) > 0 {
		st := c.fail[0]
		c.fail = c.fail[1:]
		c.mu.Unlock()
		http.Error(w, "failing on purpose", st)
		return
	}
	c.mu.Unlock()
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := Decode(raw)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.requests = append(c.requests, req)
	c.headers = append(c.headers, r.Header.Clone())
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{}`)
}

// Decode reads an OTLP/HTTP JSON export. OTLP's JSON is proto3 JSON
// except that trace and span ids are hex (proto3 JSON would have base64),
// so Decode checks the ids are hex of the right length, rewrites them to
// base64 and lets protojson reject any unknown field or wrong type.
func Decode(raw []byte) (*coltracepb.ExportTraceServiceRequest, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if err := rewriteIDs(doc); err != nil {
		return nil, err
	}
	fixed, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := protojson.Unmarshal(fixed, req); err != nil {
		return nil, fmt.Errorf("not an ExportTraceServiceRequest: %w", err)
	}
	return req, nil
}

var idLen = map[string]int{"traceId": 16, "spanId": 8, "parentSpanId": 8}

func rewriteIDs(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if n, ok := idLen[k]; ok {
				s, _ := x.(string)
				b, err := hex.DecodeString(s)
				if err != nil || len(b) != n {
					return fmt.Errorf("%s %q is not %d bytes of hex", k, s, n)
				}
				v[k] = base64.StdEncoding.EncodeToString(b)
				continue
			}
			if err := rewriteIDs(x); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := rewriteIDs(x); err != nil {
				return err
			}
		}
	}
	return nil
}
