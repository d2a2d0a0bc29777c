// Package openapitest checks that what countersign answers is what its
// OpenAPI description (web/openapi.json) says: every status code, header
// and field of every response. Tests wire Transport into their HTTP
// clients (or http.DefaultTransport) and Watch the services they start;
// an undocumented status or field fails the test that started the service.
//
// kin-openapi (v0.153) loads OpenAPI 3.1 documents, and openapi3filter
// turns on its JSON Schema 2020-12 validator (santhosh-tekuri/jsonschema)
// for them. It still falls back to its OpenAPI 3.0 validator for a schema
// with component references unless the schema uses a 2020-12 keyword; the
// description closes every object with unevaluatedProperties: false (no
// allOf, so it means additionalProperties: false), which both refuses
// undescribed fields and keeps the 2020-12 validator in charge (under the
// 3.0 fallback, a field whose schema allows any value refuses null).
// TestValidatorRefusesWhatIsNotDescribed pins both.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/web"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Validator checks responses against the description.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

var (
	loadOnce sync.Once
	loaded   *Validator
	loadErr  error
)

// Load parses and validates web/openapi.json (once per process).
func Load() (*Validator, error) {
	loadOnce.Do(func() { loaded, loadErr = load(web.OpenAPI) })
	return loaded, loadErr
}

func load(raw []byte) (*Validator, error) {
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("openapi: load: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("openapi: version %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi: invalid document: %w", err)
	}
	// Match on the path alone: tests serve on 127.0.0.1:<any port>.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: router: %w", err)
	}
	return &Validator{doc: doc, router: router}, nil
}

// Described reports whether path is part of the described API (the REST
// and admin APIs, health and the description itself). Pages, /mcp, Slack
// and metrics are not.
func Described(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/openapi.json":
		return true
	}
	return strings.HasPrefix(path, "/v1/") || path == "/v1"
}

// ErrNotDescribed is returned by Check for paths outside the API.
var ErrNotDescribed = errors.New("openapi: path is not part of the described API")

// Check validates one response to req. A /v1 request that matches no
// described operation must get the contract's not_found error.
func (v *Validator) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if !Described(req.URL.Path) {
		return ErrNotDescribed
	}
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		if status != http.StatusNotFound {
			return fmt.Errorf("%s %s is not described, and answered %d instead of 404 not_found", req.Method, req.URL.Path, status)
		}
		return v.checkSchema("Error", body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// CheckSchema validates body against the schema name of the components
// (e.g. StatusEvent, what the status webhooks post).
func (v *Validator) CheckSchema(name string, body []byte) error { return v.checkSchema(name, body) }

// checkSchema validates body against a schema of the components.
func (v *Validator) checkSchema(name string, body []byte) error {
	ref := v.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("openapi: no schema %s", name)
	}
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	return ref.Value.VisitJSON(value, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors())
}

// Transport is an http.RoundTripper that validates the responses of the
// services it watches, and passes everything else through untouched.
type Transport struct {
	Base http.RoundTripper
	V    *Validator

	mu      sync.Mutex
	watch   map[string]testing.TB // host:port → the test that started it
	checked atomic.Int64
}

// NewTransport wraps base (http.DefaultTransport when nil).
func NewTransport(base http.RoundTripper) (*Transport, error) {
	v, err := Load()
	if err != nil {
		return nil, err
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{Base: base, V: v, watch: map[string]testing.TB{}}, nil
}

// Watch validates every response from the service at baseURL until t
// ends; a mismatch fails t.
func (tr *Transport) Watch(t testing.TB, baseURL string) {
	host := strings.TrimPrefix(strings.TrimPrefix(baseURL, "http://"), "https://")
	host, _, _ = strings.Cut(host, "/")
	tr.mu.Lock()
	tr.watch[host] = t
	tr.mu.Unlock()
	t.Cleanup(func() {
		tr.mu.Lock()
		delete(tr.watch, host)
		tr.mu.Unlock()
	})
}

// Checked is the number of responses validated so far.
func (tr *Transport) Checked() int64 { return tr.checked.Load() }

// RoundTrip implements http.RoundTripper.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tr.Base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	tr.mu.Lock()
	t := tr.watch[req.URL.Host]
	tr.mu.Unlock()
	if t == nil || !Described(req.URL.Path) || req.Method == http.MethodHead {
		return resp, nil
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return nil, rerr
	}
	tr.checked.Add(1)
	if verr := tr.V.Check(req, resp.StatusCode, resp.Header, body); verr != nil {
		t.Errorf("openapi: %s %s → %d does not match web/openapi.json: %v\nbody: %.600s", req.Method, req.URL.RequestURI(), resp.StatusCode, verr, body)
	}
	return resp, nil
}
