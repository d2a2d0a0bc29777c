package slackpost

import "github.com/countersign/countersign/action"

// ToolName is the MCP tool that prepares slack.post_message.
const ToolName = "prepare_slack_message"

// Descriptor declares slack.post_message: allowed by the scope of its
// name, undone by slack.delete_message, prepared by prepare_slack_message.
var Descriptor = action.Descriptor{Name: Name, Undo: true, Tool: &action.Tool{
	Name: ToolName, Title: "Prepare a Slack message for approval",
	Description: "Prepare a Slack message for a human to approve, and see exactly what would be posted. It stores a draft and returns its operation_key and preview.",
}}

// DeleteDescriptor declares slack.delete_message, the undo of a post: only
// prepare_undo prepares it.
var DeleteDescriptor = action.Descriptor{Name: DeleteName}
