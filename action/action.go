// Package action holds what every action declares about itself: its
// Descriptor. Each action package (action/email, action/slackpost,
// action/httpreq, …) exports its own, next to its code; action/registry
// lists them once, and the policy file's checks (config), the MCP tools
// (mcpserver) and the wiring (cmd/countersign) read that list.
package action

// Descriptor is an action's name, the scopes that allow it and the MCP
// tool that prepares it.
type Descriptor struct {
	// Name is the contract name, e.g. "email.send". It is the scope that
	// allows the action, and what a route's match.action names.
	Name string
	// Targets says the action writes to targets configured in the policy
	// file: a scope "<name>:<target>" allows it on that target only, and
	// only its routes may match.target.
	Targets bool
	// Undo says succeeded operations of the action can be taken back
	// (approval.Undoer): prepare_undo is offered where such an action is.
	Undo bool
	// ToolCalls says the action stands for an agent host's own tool call
	// (host.tool_call): only its routes may match.tool.
	ToolCalls bool
	// ScopeBase, when set, is the base of the scopes that allow the action
	// instead of its name: mcp.call is allowed by "mcp:NAME" and
	// "mcp:NAME/TOOL".
	ScopeBase string
	// Tool is the MCP tool that prepares the action; nil when no tool
	// prepares it directly (an undo action, made only by prepare_undo).
	Tool *Tool
}

// Tool is an action's prepare tool. mcpserver holds the tool's arguments
// and adds the words every prepare tool shares (nothing is sent before
// send_operation, idempotency_key, …) after Description.
type Tool struct {
	// Name is the tool's name, e.g. "prepare_email".
	Name string
	// Title is the tool's title for people, e.g. "Prepare an email for approval".
	Title string
	// Description says what the tool prepares and returns.
	Description string
}
