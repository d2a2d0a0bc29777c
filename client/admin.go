package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/countersign/countersign/approval"
)

// Admin calls the admin API of one countersign service (SPEC §6) with an
// operator key: every principal's operations, cancel, and settling those
// left executing. `countersign ops` is built on it.
//
//	a, err := client.NewAdmin("http://127.0.0.1:8080", os.Getenv("COUNTERSIGN_OPERATOR_KEY"), nil)
//	stuck, err := a.List(ctx, client.AdminQuery{Stuck: true})
//	op, err := a.Reconcile(ctx, stuck[0].OperationKey, approval.StatusFailed, "the target has no such invoice")
//
// Errors are *approval.Error, as for Client.
type Admin struct {
	c *Client
}

// NewAdmin checks baseURL and returns an admin client for the operator of
// operatorKey.
func NewAdmin(baseURL, operatorKey string, opts *Options) (*Admin, error) {
	c, err := newClient(baseURL, operatorKey, "an operator key", opts)
	if err != nil {
		return nil, err
	}
	return &Admin{c: c}, nil
}

// BaseURL is the service's base URL.
func (a *Admin) BaseURL() string { return a.c.BaseURL() }

// AdminQuery selects operations (GET /v1/admin/operations).
type AdminQuery struct {
	Status    approval.Status
	Principal string
	// Stuck lists operations executing for longer than OlderThan (the
	// service's default, 5 minutes, when zero).
	Stuck     bool
	OlderThan time.Duration
	Limit     int
}

// List returns operations of every principal (or one), newest first;
// stuck ones oldest first. Returns invalid_input, unauthenticated.
func (a *Admin) List(ctx context.Context, q AdminQuery) ([]approval.AdminView, error) {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", string(q.Status))
	}
	if q.Principal != "" {
		v.Set("principal", q.Principal)
	}
	if q.Stuck {
		v.Set("stuck", "true")
		if q.OlderThan > 0 {
			v.Set("older_than_seconds", strconv.Itoa(int((q.OlderThan+time.Second-1)/time.Second)))
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out struct {
		Operations []approval.AdminView `json:"operations"`
	}
	_, err := a.c.do(ctx, http.MethodGet, "/v1/admin/operations", v, nil, 0, &out)
	if out.Operations == nil {
		out.Operations = []approval.AdminView{}
	}
	return out.Operations, err
}

// Show returns any principal's operation and its audit trail
// (GET /v1/admin/operations/{key}). Returns not_found.
func (a *Admin) Show(ctx context.Context, key string) (approval.AdminView, []approval.Event, error) {
	var out struct {
		Operation approval.AdminView `json:"operation"`
		Events    []approval.Event   `json:"events"`
	}
	if err := checkKey(key); err != nil {
		return out.Operation, nil, err
	}
	_, err := a.c.do(ctx, http.MethodGet, "/v1/admin/operations/"+key, nil, nil, 0, &out)
	return out.Operation, out.Events, err
}

// Cancel ends a draft or pending operation of any principal
// (POST /v1/admin/operations/{key}/cancel). Returns not_found, invalid_state.
func (a *Admin) Cancel(ctx context.Context, key string) (approval.AdminView, error) {
	var v approval.AdminView
	if err := checkKey(key); err != nil {
		return v, err
	}
	_, err := a.c.do(ctx, http.MethodPost, "/v1/admin/operations/"+key+"/cancel", nil, nil, 0, &v)
	return v, err
}

// Reconcile settles an operation left executing as succeeded or failed,
// with a note of what the operator checked, kept in the audit
// (POST /v1/admin/operations/{key}/reconcile). Returns invalid_input,
// not_found, invalid_state.
func (a *Admin) Reconcile(ctx context.Context, key string, outcome approval.Status, note string) (approval.AdminView, error) {
	var v approval.AdminView
	if err := checkKey(key); err != nil {
		return v, err
	}
	_, err := a.c.do(ctx, http.MethodPost, "/v1/admin/operations/"+key+"/reconcile", nil,
		approval.ReconcileCall{Outcome: outcome, Note: note}, 0, &v)
	return v, err
}
