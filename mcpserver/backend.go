package mcpserver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Backend is countersign's agent API as one principal sees it: what the
// tools call. The in-process service (Local) and the REST client
// (*client.Client, for the stdio bridge) both satisfy it, so the tool
// layer is written once.
//
// Every method returns an *approval.Error with a contract code, or a
// foreign error that the tools report as internal (and log).
type Backend interface {
	// Prepare validates and stores a draft; it reaches no human and changes
	// nothing remote. created is false when the idempotency key returned an
	// existing operation. Returns unknown_action, invalid_input,
	// insufficient_scope, policy_denied, no_route, idempotency_key_reused,
	// rate_limited, unavailable; nothing is stored on any error.
	Prepare(ctx context.Context, call approval.PrepareCall) (op approval.View, created bool, err error)
	// RequestAllowance asks the approvers for an allowance (SPEC §10): an
	// allowance.grant operation, prepared and sent. Returns the codes of
	// Prepare and Send.
	RequestAllowance(ctx context.Context, input json.RawMessage, idempotencyKey string) (op approval.View, created bool, err error)
	// PrepareUndo drafts the compensating operation of a succeeded one.
	// Returns not_found, invalid_state, stale_state and the codes of Prepare.
	PrepareUndo(ctx context.Context, key string) (op approval.View, created bool, err error)
	// Send asks the route's approvers; sending again changes nothing.
	// Returns not_found, invalid_state, writes_disabled.
	Send(ctx context.Context, key string) (approval.View, error)
	// Get returns the operation; with wait > 0 it returns as soon as the
	// operation changes, or after wait (at most 30 s), or when the service
	// shuts down. Returns not_found.
	Get(ctx context.Context, key string, wait time.Duration) (approval.View, error)
	// Cancel ends a draft or pending operation. Returns not_found,
	// invalid_state.
	Cancel(ctx context.Context, key string) (approval.View, error)
	// List returns the principal's own operations, newest first. Returns
	// invalid_input for an unknown status.
	List(ctx context.Context, status approval.Status) ([]approval.View, error)
	// GatewayTools lists the upstream MCP servers' tools the principal may
	// call (SPEC §12), named NAME__TOOL; none where no gateway is.
	GatewayTools(ctx context.Context) ([]*mcp.Tool, error)
	// CallGateway calls one: its tools/call result (a pass tool's own, or
	// a guarded call's pending operation). Returns not_found,
	// insufficient_scope, rate_limited, policy_denied, unavailable and the
	// codes of Prepare and Send.
	CallGateway(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
}

var (
	_ Backend = (*Local)(nil)
	_ Backend = (*client.Client)(nil)
)

// Local is the in-process backend: the approval service, as one principal.
type Local struct {
	Service *approval.Service
	// Principal is the caller; the service counts its calls against the
	// same rate as the REST API, so MCP is no way around it.
	Principal *approval.Principal
	// Gateway, when set, serves the upstream MCP servers' tools.
	Gateway *gateway.Gateway
}

func (l *Local) view(op *approval.Operation) approval.View {
	return approval.AgentView(op, l.Service.Now())
}

// check refuses calls without a principal (the service would treat nil as
// an operator, who sees every operation).
func (l *Local) check(context.Context) error {
	if l.Principal == nil {
		return approval.Errorf(approval.CodeUnauthenticated, "no principal: send Authorization: Bearer <api key>")
	}
	return nil
}

// Prepare implements Backend.
func (l *Local) Prepare(ctx context.Context, call approval.PrepareCall) (approval.View, bool, error) {
	if err := l.check(ctx); err != nil {
		return approval.View{}, false, err
	}
	op, created, err := l.Service.Prepare(ctx, l.Principal, call)
	if err != nil {
		return approval.View{}, false, err
	}
	return l.view(op), created, nil
}

// RequestAllowance implements Backend.
func (l *Local) RequestAllowance(ctx context.Context, input json.RawMessage, idem string) (approval.View, bool, error) {
	if err := l.check(ctx); err != nil {
		return approval.View{}, false, err
	}
	op, created, err := l.Service.RequestAllowance(ctx, l.Principal, input, idem)
	if err != nil {
		return approval.View{}, false, err
	}
	return l.view(op), created, nil
}

// PrepareUndo implements Backend.
func (l *Local) PrepareUndo(ctx context.Context, key string) (approval.View, bool, error) {
	if err := l.check(ctx); err != nil {
		return approval.View{}, false, err
	}
	op, created, err := l.Service.PrepareUndo(ctx, l.Principal, key)
	if err != nil {
		return approval.View{}, false, err
	}
	return l.view(op), created, nil
}

// Send implements Backend.
func (l *Local) Send(ctx context.Context, key string) (approval.View, error) {
	if err := l.check(ctx); err != nil {
		return approval.View{}, err
	}
	op, err := l.Service.Send(ctx, l.Principal, key)
	if err != nil {
		return approval.View{}, err
	}
	return l.view(op), nil
}

// Get implements Backend. The long-poll has its own deadline and ends when
// the service closes (approval.Service.Wait), because the request context
// may never end: through fiber's adaptor it is the fasthttp request, whose
// Done fires only at server shutdown.
func (l *Local) Get(ctx context.Context, key string, wait time.Duration) (approval.View, error) {
	if err := l.check(ctx); err != nil {
		return approval.View{}, err
	}
	if wait > client.MaxWait {
		wait = client.MaxWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait+10*time.Second)
	defer cancel()
	op, err := l.Service.Wait(ctx, l.Principal, key, wait)
	if err != nil {
		return approval.View{}, err
	}
	return l.view(op), nil
}

// Cancel implements Backend.
func (l *Local) Cancel(ctx context.Context, key string) (approval.View, error) {
	if err := l.check(ctx); err != nil {
		return approval.View{}, err
	}
	op, err := l.Service.Cancel(ctx, l.Principal, key)
	if err != nil {
		return approval.View{}, err
	}
	return l.view(op), nil
}

// List implements Backend.
func (l *Local) List(ctx context.Context, status approval.Status) ([]approval.View, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	ops, err := l.Service.List(ctx, l.Principal, status)
	if err != nil {
		return nil, err
	}
	out := make([]approval.View, len(ops))
	for i, op := range ops {
		out[i] = l.view(op)
	}
	return out, nil
}
