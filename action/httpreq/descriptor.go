package httpreq

import "github.com/countersign/countersign/action"

// ToolName is the MCP tool that prepares http.request.
const ToolName = "prepare_http_request"

// Descriptor declares http.request: allowed by the scope of its name, or on
// one target by "http.request:<target>" (Scope); undone by writing back
// the previous values; prepared by prepare_http_request.
var Descriptor = action.Descriptor{Name: Name, Targets: true, Undo: true, Tool: &action.Tool{
	Name: ToolName, Title: "Prepare an HTTP request for approval",
	Description: "Prepare a write to a configured HTTP API (a target such as a calendar or store) for a human to approve. " +
		"countersign checks the target's allow list, reads the current state of what the request changes, and shows the field-level diff in the preview; the human approves that exact request. " +
		"It stores a draft and returns its operation_key; it writes nothing. If the remote state changes before execution, the operation fails with stale_state and nothing is written. " +
		"Bulk: pass items (at most 100 requests, all to the one target) instead of method, path, query and body to have a whole batch (e.g. rescheduling twenty events) approved as one operation with one preview: a summary line and a diff per item. " +
		"Before the first write every item is read again, and if any changed, nothing is written; then the items are written in order, each with its own Idempotency-Key (operation_key:N, N from 1), and the first failure stops the rest. " +
		"result.items says what happened to each; if a later item fails, the operation is failed with error.details.partial true and the counts, and prepare_undo takes back the written items.",
}}
