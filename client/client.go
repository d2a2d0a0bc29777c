// Package client is a small Go client for countersign's REST API (SPEC §6):
// a principal prepares, sends, follows, cancels and undoes its operations
// with its API key. It never approves anything; no endpoint it can reach
// with an agent's key does.
//
//	c, err := client.New("http://127.0.0.1:8080", os.Getenv("COUNTERSIGN_API_KEY"), nil)
//	op, _, err := c.Prepare(ctx, approval.PrepareCall{Action: "email.send", Input: input})
//	op, err = c.Send(ctx, op.OperationKey)
//	op, err = c.Get(ctx, op.OperationKey, 30*time.Second) // long-poll for a change
//
// Every error it returns is an *approval.Error with a contract code: the
// service's own error as it answered, or unavailable when it could not be
// reached (with a message that says whether the request may have arrived).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

// MaxWait is the longest long-poll the service accepts.
const MaxWait = 30 * time.Second

// maxResponse caps how much of a response body is read.
const maxResponse = 8 << 20

// Options tune a Client. The zero value is fine.
type Options struct {
	// HTTPClient makes the requests (default: a client with no overall
	// timeout; each call sets its own deadline).
	HTTPClient *http.Client
	// UserAgent is sent with each request (default "countersign-client").
	UserAgent string
	// Timeout bounds each call, on top of any long-poll wait (default 30 s).
	Timeout time.Duration
}

// Client calls one countersign service as one principal. It is safe for
// concurrent use.
type Client struct {
	base    *url.URL
	apiKey  string
	hc      *http.Client
	ua      string
	timeout time.Duration
}

// New checks baseURL (an absolute http or https URL of a running
// `countersign serve`) and returns a client for the principal of apiKey.
func New(baseURL, apiKey string, opts *Options) (*Client, error) {
	return newClient(baseURL, apiKey, "an API key", opts)
}

// newClient builds a client for any bearer key; what names the key in errors.
func newClient(baseURL, apiKey, what string, opts *Options) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(baseURL), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: %q is not an http(s) URL of a countersign service", baseURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("client: the service URL must not carry credentials, a query or a fragment")
	}
	if strings.TrimSpace(apiKey) == "" {
		return nil, fmt.Errorf("client: %s is required", what)
	}
	c := &Client{base: u, apiKey: strings.TrimSpace(apiKey), hc: http.DefaultClient, ua: "countersign-client", timeout: 30 * time.Second}
	if opts != nil {
		if opts.HTTPClient != nil {
			c.hc = opts.HTTPClient
		}
		if opts.UserAgent != "" {
			c.ua = opts.UserAgent
		}
		if opts.Timeout > 0 {
			c.timeout = opts.Timeout
		}
	}
	return c, nil
}

// BaseURL is the service's base URL.
func (c *Client) BaseURL() string { return c.base.String() }

// Prepare stores a draft (POST /v1/operations). created is false when the
// idempotency key returned an existing operation. Returns unknown_action,
// invalid_input, insufficient_scope, policy_denied, no_route,
// idempotency_key_reused, payload_too_large, rate_limited, unavailable.
func (c *Client) Prepare(ctx context.Context, call approval.PrepareCall) (approval.View, bool, error) {
	var v approval.View
	status, err := c.do(ctx, http.MethodPost, "/v1/operations", nil, call, 0, &v)
	return v, status == http.StatusCreated, err
}

// RequestAllowance asks the approvers for an allowance (POST
// /v1/allowances): input is {action, match, budget, ttl, reason}.
func (c *Client) RequestAllowance(ctx context.Context, input json.RawMessage, idempotencyKey string) (approval.View, bool, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(input, &body); err != nil {
		return approval.View{}, false, approval.FieldErrors{{Field: "input", Reason: "must be a JSON object"}}.Err()
	}
	if idempotencyKey != "" {
		k, _ := json.Marshal(idempotencyKey)
		body["idempotency_key"] = k
	}
	var v approval.View
	status, err := c.do(ctx, http.MethodPost, "/v1/allowances", nil, body, 0, &v)
	return v, status == http.StatusCreated, err
}

// PrepareUndo drafts the compensating operation of a succeeded one
// (POST /v1/operations/{key}/undo). Returns not_found, invalid_state,
// stale_state and the codes of Prepare.
func (c *Client) PrepareUndo(ctx context.Context, key string) (approval.View, bool, error) {
	if err := checkKey(key); err != nil {
		return approval.View{}, false, err
	}
	var v approval.View
	status, err := c.do(ctx, http.MethodPost, "/v1/operations/"+key+"/undo", nil, nil, 0, &v)
	return v, status == http.StatusCreated, err
}

// Send asks the route's approvers (POST /v1/operations/{key}/send). Sending
// again changes nothing. Returns not_found, invalid_state, writes_disabled.
func (c *Client) Send(ctx context.Context, key string) (approval.View, error) {
	if err := checkKey(key); err != nil {
		return approval.View{}, err
	}
	var v approval.View
	_, err := c.do(ctx, http.MethodPost, "/v1/operations/"+key+"/send", nil, nil, 0, &v)
	return v, err
}

// Get returns the operation (GET /v1/operations/{key}). With wait > 0 it
// long-polls: it returns as soon as the operation changes, or after wait
// (rounded up to whole seconds, at most MaxWait). Returns not_found,
// invalid_input (wait out of range).
func (c *Client) Get(ctx context.Context, key string, wait time.Duration) (approval.View, error) {
	return c.get(ctx, key, wait, false)
}

// GetFull is Get with the whole input (?full=1): Get's view, like every
// agent-facing result, stands in for large input values with their size,
// digest and head (SPEC §13).
func (c *Client) GetFull(ctx context.Context, key string, wait time.Duration) (approval.View, error) {
	return c.get(ctx, key, wait, true)
}

func (c *Client) get(ctx context.Context, key string, wait time.Duration, full bool) (approval.View, error) {
	if err := checkKey(key); err != nil {
		return approval.View{}, err
	}
	q := url.Values{}
	secs := 0
	if wait > 0 {
		secs = int((wait + time.Second - 1) / time.Second)
		q.Set("wait", strconv.Itoa(secs))
	}
	if full {
		q.Set("full", "1")
	}
	var v approval.View
	_, err := c.do(ctx, http.MethodGet, "/v1/operations/"+key, q, nil, time.Duration(secs)*time.Second, &v)
	return v, err
}

// Cancel ends a draft or pending operation (POST /v1/operations/{key}/cancel).
// Returns not_found, invalid_state.
func (c *Client) Cancel(ctx context.Context, key string) (approval.View, error) {
	if err := checkKey(key); err != nil {
		return approval.View{}, err
	}
	var v approval.View
	_, err := c.do(ctx, http.MethodPost, "/v1/operations/"+key+"/cancel", nil, nil, 0, &v)
	return v, err
}

// List returns the principal's own operations, newest first, optionally
// only those in status (GET /v1/operations?status=). Returns invalid_input
// for an unknown status.
func (c *Client) List(ctx context.Context, status approval.Status) ([]approval.View, error) {
	var q url.Values
	if status != "" {
		q = url.Values{"status": {string(status)}}
	}
	var out struct {
		Operations []approval.View `json:"operations"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/operations", q, nil, 0, &out)
	if out.Operations == nil {
		out.Operations = []approval.View{}
	}
	return out.Operations, err
}

// Events returns the audit trail of the principal's operation
// (GET /v1/operations/{key}/events). Returns not_found.
func (c *Client) Events(ctx context.Context, key string) ([]approval.Event, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	var out struct {
		Events []approval.Event `json:"events"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/operations/"+key+"/events", nil, nil, 0, &out)
	return out.Events, err
}

// Tools names the MCP tools the service serves this principal
// (GET /v1/tools), as its /mcp lists them. Returns not_found from a
// service that predates the endpoint.
func (c *Client) Tools(ctx context.Context) ([]string, error) {
	var out struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/tools", nil, nil, 0, &out); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(out.Tools))
	for _, t := range out.Tools {
		names = append(names, t.Name)
	}
	return names, nil
}

// checkKey refuses ill-formed keys before they become part of a URL path,
// with the service's own answer for them.
func checkKey(key string) error {
	if !approval.ValidOperationKey(key) {
		return approval.Errorf(approval.CodeNotFound, "no operation %q: keys look like op_ followed by 26 characters", key)
	}
	return nil
}

// do sends one request and decodes a 2xx JSON body into out. extra is
// added to the call's deadline (the long-poll wait).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body any, extra time.Duration, out any) (int, error) {
	u := *c.base
	u.Path = c.base.Path + path
	if q != nil {
		u.RawQuery = q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, approval.Errorf(approval.CodeInvalidInput, "request cannot be encoded as JSON")
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout+extra)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, approval.Errorf(approval.CodeInvalidInput, "cannot build the request")
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, c.transportError(method, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return resp.StatusCode, c.transportError(method, err)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, apiError(resp, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, approval.Errorf(approval.CodeUnavailable,
			"countersign at %s answered HTTP %d with a body that is not the expected JSON", c.base.Host, resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// transportError reports a request that got no answer. For a POST it may
// still have arrived: say so, so that a caller retries only with an
// idempotency key or after looking at the status.
func (c *Client) transportError(method string, err error) error {
	reason := "the request failed"
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		reason = "the call was canceled"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		reason = "no answer in time"
	default:
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			reason = "cannot connect"
			method = http.MethodGet // nothing was sent
		}
	}
	msg := fmt.Sprintf("countersign at %s is unavailable: %s", c.base.Host, reason)
	if method == http.MethodPost {
		msg += "; the request may or may not have reached it, so check the operation's status (or retry with the same idempotency_key) before doing it again"
	}
	return approval.Errorf(approval.CodeUnavailable, "%s", msg)
}

// apiError decodes the contract's error body, or names the status when the
// body is not one (a proxy's error page).
func apiError(resp *http.Response, data []byte) error {
	var body struct {
		Error *approval.Error `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil && body.Error.Code != "" {
		e := body.Error
		if e.Code == approval.CodeRateLimited && e.Details == nil {
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
				e.Details = map[string]any{"retry_after_seconds": s}
			}
		}
		return e
	}
	code := approval.CodeUnavailable
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		code = approval.CodeUnauthenticated
	case http.StatusRequestEntityTooLarge:
		code = approval.CodePayloadTooLarge
	case http.StatusTooManyRequests:
		code = approval.CodeRateLimited
	default:
		return approval.Errorf(code, "%s answered HTTP %d %s without countersign's error body; is the service URL right?",
			resp.Request.URL.Host, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return approval.Errorf(code, "countersign answered HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
}
