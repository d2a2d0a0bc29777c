package mcpcall

import "github.com/countersign/countersign/action"

// Name is the action's contract name.
const Name = "mcp.call"

// ScopeBase is the base of the scopes that allow mcp.call: "mcp:NAME"
// allows every tool of the upstream NAME, "mcp:NAME/TOOL" one tool.
const ScopeBase = "mcp"

// Descriptor declares mcp.call (SPEC §12): a guarded call of an upstream
// MCP server's tool. Its targets are the policy file's upstreams, routes
// match its tool, and no prepare tool makes it: an agent calls the
// upstream's tool as NAME__TOOL (or prepares mcp.call over REST).
var Descriptor = action.Descriptor{Name: Name, ScopeBase: ScopeBase, Targets: true, ToolCalls: true}
