package approval

import (
	"context"
	"encoding/json"
)

// Action is a kind of effect (email.send, slack.post_message, http.request).
// Preview and execution come from the same normalized input: there is no
// second "describe what you would do" path.
type Action interface {
	// Name is the action's contract name, e.g. "email.send".
	Name() string
	// Prepare validates and normalizes raw input, renders the preview, and
	// for actions that change an existing remote object, snapshots the
	// state it depends on. It may read remote state; it never writes.
	// Returns invalid_input (with details.fields) or policy_denied (with
	// details.rule).
	Prepare(ctx context.Context, req PrepareRequest) (*Prepared, error)
	// Execute carries out the stored operation exactly as prepared, passing
	// the operation key downstream for deduplication. Returns the result to
	// record, or an *ExecError that becomes the operation's error; any other
	// error is recorded as execution_failed with an unknown outcome. A
	// result returned along with an error (what a bulk did before one of
	// its items failed) is recorded too.
	Execute(ctx context.Context, op *Operation) (json.RawMessage, error)
}

// PrepareRequest is the raw input of a prepare, with who asks for it.
type PrepareRequest struct {
	Principal *Principal
	Input     json.RawMessage
}

// Prepared is an action's normalized view of a request.
type Prepared struct {
	// Input is the normalized input; it is stored canonicalized and is
	// exactly what Execute receives.
	Input any
	// Preview renders Input for humans and the agent.
	Preview Preview
	// Scope is what the principal needs, e.g. "http.request:calendar".
	Scope string
	// Attrs are facts that routes may match on (e.g. "target").
	Attrs map[string]string
	// State binds the operation to the remote state it was prepared against.
	State *StateBinding
}

// Rechecker is implemented by actions whose operations are bound to remote
// state: it reports whether the state still matches, for the approval page
// and Slack to warn before anyone approves. It returns a *ExecError with
// code stale_state when the state moved on.
type Rechecker interface {
	Recheck(ctx context.Context, op *Operation) error
}

// Undoer is implemented by actions that can compensate a succeeded
// operation: it returns the raw input of the compensating operation (which
// goes through Prepare and approval like any other). Returns invalid_state
// when the action or this operation cannot be undone.
type Undoer interface {
	UndoInput(ctx context.Context, op *Operation) (action string, input json.RawMessage, err error)
}

// IrreversibleOps is implemented by every action some of whose operations
// are irreversible (they carry the warning "irreversible"): email.send
// (all of them), http.request (POST and DELETE). Allowances approve such
// operations only on a route that says allowances: allow, so an allowance
// request is refused when every operation it covers is irreversible and no
// route they could take says so (it would be approved, then never used),
// and told, in its preview, which of its operations still go to a person
// when only some are.
type IrreversibleOps interface {
	// Irreversible says which operations an allowance could cover are
	// irreversible, given the values the allowance pins (attribute → the
	// values it allows; an attribute absent is not pinned): all of them,
	// or some, named in plain words ("POST and DELETE requests"), or none
	// (false and "").
	Irreversible(pinned map[string][]string) (all bool, some string)
}

// ScopeBaser is implemented by actions whose scopes are not named after
// the action: mcp.call is allowed by "mcp:NAME" and "mcp:NAME/TOOL".
// Prepared.Scope then names the exact scope each operation needs. ""
// means the action's name is its scope base.
type ScopeBaser interface {
	ScopeBase() string
}
