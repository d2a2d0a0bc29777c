package hosttool

import "github.com/countersign/countersign/action"

// Descriptor declares host.tool_call: allowed by the scope of its name,
// routed by match.tool, asked for by a hook (countersign hook claude-code)
// over REST, so no MCP tool prepares it.
var Descriptor = action.Descriptor{Name: Name, ToolCalls: true}
