package email

import "github.com/countersign/countersign/action"

// ToolName is the MCP tool that prepares email.send.
const ToolName = "prepare_email"

// Descriptor declares email.send: allowed by the scope of its name, never
// undone (an email cannot be taken back), prepared by prepare_email.
var Descriptor = action.Descriptor{Name: Name, Tool: &action.Tool{
	Name: ToolName, Title: "Prepare an email for approval",
	Description: "Prepare an email for a human to approve, and see exactly what would be sent. It stores a draft with the normalized message and returns its operation_key and preview.",
}}
