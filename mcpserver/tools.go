package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names of SPEC §6. They are the whole tool surface: none of them
// approves, rejects or decides anything (tools_test.go pins this list).
// The prepare tools of actions are named by the actions (action.Descriptor).
const (
	ToolPrepareEmail        = email.ToolName
	ToolPrepareSlackMessage = slackpost.ToolName
	ToolPrepareHTTPRequest  = httpreq.ToolName
	ToolPrepareUndo         = "prepare_undo"
	ToolSendOperation       = "send_operation"
	ToolGetOperationStatus  = "get_operation_status"
	ToolCancelOperation     = "cancel_operation"
	ToolListOperations      = "list_operations"
	ToolRequestAllowance    = "request_allowance"
)

// ToolNames lists every tool, in the order tools/list shows them: the
// prepare tools of the registered actions (action/registry), then the
// service's own.
var ToolNames = append(prepareToolNames(), ToolPrepareUndo,
	ToolSendOperation, ToolGetOperationStatus, ToolCancelOperation, ToolListOperations, ToolRequestAllowance)

// Actions behind the prepare tools.
const (
	ActionEmailSend        = email.Name
	ActionSlackPostMessage = slackpost.Name
	ActionHTTPRequest      = httpreq.Name
)

// MaxWaitSeconds is the longest long-poll of get_operation_status.
const MaxWaitSeconds = 30

// Instructions are the server instructions: the whole flow in a few lines.
const Instructions = `countersign lets you prepare consequential actions (emails, Slack messages, writes to configured HTTP APIs) that only a human can approve. You can never approve anything: no tool approves, and no result ever contains an approval token, link or code. Humans approve out of band, in Slack or through an emailed link.

Flow:
1. prepare_email / prepare_slack_message / prepare_http_request store a draft and return its operation_key and the exact preview the human will see. Nothing is sent and nobody is asked yet.
2. send_operation asks the approvers. Tell the user it is waiting for approval.
3. get_operation_status follows it; pass wait_seconds (up to 30) to wait for a change instead of polling quickly. Once approved, countersign itself carries out exactly the stored action, once.
Statuses: draft → pending_approval → approved → executing → succeeded | failed; or rejected, expired, canceled. Those five and succeeded/failed are final.

Keep each operation_key. Read next_step in every result. Use idempotency_key when you may retry a prepare. If an operation is rejected, read approval.rejection.reason and do not send it again; prepare a changed one if the user wants. To change anything, prepare a new operation and cancel_operation the old one. list_operations shows your operations.`

// instructions are Instructions naming only the prepare tools listed, of
// every registered action (action/registry).
func instructions(unavailable []string) string {
	all := prepareToolNames()
	var tools []string
	for _, t := range all {
		if !slices.Contains(unavailable, t) {
			tools = append(tools, t)
		}
	}
	out := strings.Replace(Instructions, "prepare_email / prepare_slack_message / prepare_http_request", strings.Join(tools, " / "), 1)
	if len(tools) < len(all) {
		out += " This service offers " + strings.Join(tools, ", ") + " only: the other actions are not configured here."
	}
	if len(unavailable) > 0 {
		var here []string
		for _, t := range ToolNames {
			if !slices.Contains(unavailable, t) {
				here = append(here, t)
			}
		}
		out += "\n\nTools of this service: " + strings.Join(here, ", ") + "."
	}
	return out
}

const noCapability = "A human approves or rejects it out of band (Slack or an emailed link); you will never receive a token, link or code, and no tool can approve. "

const followUp = "Follow it with get_operation_status, passing wait_seconds (up to 30) to wait for a change."

const prepareTail = "It does not send anything and does not notify anyone: call send_operation with the returned operation_key to ask a human to approve it. " +
	noCapability + "Once approved, countersign executes exactly this stored action, once. " + followUp +
	" A draft that is not sent expires (expires_at). Pass idempotency_key to make retries safe: the same key with the same arguments returns the same operation instead of a second one."

type allowanceArgs struct {
	Action         string          `json:"action" jsonschema:"the action the allowance approves without asking, e.g. email.send"`
	Match          json.RawMessage `json:"match,omitempty" jsonschema:"what matching operations must be: attribute → list of allowed values (every element of a list attribute such as domains must be in it), or {min, max} for a number; e.g. {\"domains\": [\"client.example\"]}"`
	Budget         json.RawMessage `json:"budget" jsonschema:"how much it may approve in all: {\"count\": 20} operations and/or {\"sum\": {\"attr\": \"body.amount\", \"max\": 5000}}"`
	TTL            json.RawMessage `json:"ttl" jsonschema:"how long it lasts once approved: a duration such as 72h or 3d (at most 7 days)"`
	Reason         string          `json:"reason" jsonschema:"why you need it, in words for the human who decides"`
	IdempotencyKey string          `json:"idempotency_key,omitempty" jsonschema:"optional key (1-128 printable ASCII characters, no spaces) that makes retrying safe"`
}

// MaxBulkItems is the most items prepare_http_request takes (SPEC §10).
const MaxBulkItems = 100

type keyArgs struct {
	OperationKey string `json:"operation_key" jsonschema:"the operation's key, op_ followed by 26 characters, from an earlier result"`
}

type statusArgs struct {
	OperationKey string `json:"operation_key" jsonschema:"the operation's key, op_ followed by 26 characters, from an earlier result"`
	WaitSeconds  int    `json:"wait_seconds,omitempty" jsonschema:"optional long-poll: wait up to this many seconds (0-30) for the operation to change, then return its status; 0 returns at once"`
	Full         bool   `json:"full,omitempty" jsonschema:"optional: true returns the whole input; by default a large value (a body, an attachment) is shown as {omitted, bytes, sha256, head}"`
}

type listArgs struct {
	Status string `json:"status,omitempty" jsonschema:"optional: only operations in this status"`
}

// ListResult is the structured content of list_operations.
type ListResult struct {
	Operations []approval.View `json:"operations"`
}

func ptr[T any](v T) *T { return &v }

// prepareAnnotations: read-only false, destructive false, idempotent true.
func prepareAnnotations(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: false, DestructiveHint: ptr(false), IdempotentHint: true}
}

func (s *server) addTools() {
	s.addPrepareTools()

	add(s, &mcp.Tool{
		Name: ToolRequestAllowance, Title: "Ask a human for a standing allowance",
		Description: "Ask a human to approve, once, a bounded envelope of operations you may then carry out without asking each time: one action, a match on its attributes, a budget (a count of operations and/or a sum of a numeric attribute) and a time to live (at most 7 days). " +
			"It is sent to the approvers at once as an operation of action allowance.grant; while it is active and has budget, your matching operations are approved when you send them (send_operation) and run; past its budget or time, or once revoked by a human, they go to humans again. " +
			"Irreversible actions (email) are approved by allowances only where the route allows it. " + noCapability + followUp,
		Annotations: prepareAnnotations("Ask for an allowance"),
	}, func(p map[string]*jsonschema.Schema) {
		p["match"] = &jsonschema.Schema{Type: "object", Description: p["match"].Description}
		p["budget"] = &jsonschema.Schema{Type: "object", Description: p["budget"].Description}
		p["ttl"] = &jsonschema.Schema{Type: "string", Description: p["ttl"].Description}
	}, func(ctx context.Context, b Backend, in allowanceArgs) (result, error) {
		input := map[string]any{"action": in.Action, "budget": in.Budget, "ttl": in.TTL, "reason": in.Reason}
		if m := bytes.TrimSpace(in.Match); len(m) > 0 && string(m) != "null" {
			input["match"] = in.Match
		}
		raw, err := json.Marshal(input)
		if err != nil {
			return result{}, approval.FieldErrors{{Field: "input", Reason: "must be JSON"}}.Err()
		}
		v, _, err := b.RequestAllowance(ctx, raw, in.IdempotencyKey)
		if err != nil {
			return result{}, err
		}
		return viewResult(v, allowanceText(v)), nil
	})

	add(s, &mcp.Tool{
		Name: ToolPrepareUndo, Title: "Prepare the undo of a succeeded operation",
		Description: "Prepare the compensating operation of one of your succeeded operations (delete a posted Slack message; write back the previous values an HTTP update changed). " +
			"The undo is a new operation with its own operation_key and needs its own human approval: call send_operation on it. " +
			"Emails cannot be undone (invalid_state). If the target changed since the execution, it is refused with stale_state. Preparing it again returns the same draft. " +
			noCapability + followUp,
		Annotations: prepareAnnotations("Prepare an undo"),
	}, nil, func(ctx context.Context, b Backend, in keyArgs) (result, error) {
		v, created, err := b.PrepareUndo(ctx, in.OperationKey)
		if err != nil {
			return result{}, err
		}
		return viewResult(v, undoText(v, created, in.OperationKey)), nil
	})

	add(s, &mcp.Tool{
		Name: ToolSendOperation, Title: "Send an operation for human approval",
		Description: "Send a prepared draft to its human approvers: countersign notifies them in Slack and/or by email with the exact preview. " +
			"This does not approve or execute anything: it only asks. " + noCapability +
			"Once approved, countersign executes the stored action itself, exactly once. Calling it again changes nothing and returns the current status. " +
			"It is refused with invalid_state for an expired, rejected or canceled operation, and with writes_disabled while the service's kill switch is on. " + followUp,
		Annotations: &mcp.ToolAnnotations{Title: "Send for approval", ReadOnlyHint: false, DestructiveHint: ptr(true),
			IdempotentHint: true, OpenWorldHint: ptr(true)},
	}, nil, func(ctx context.Context, b Backend, in keyArgs) (result, error) {
		v, err := b.Send(ctx, in.OperationKey)
		if err != nil {
			return result{}, err
		}
		return viewResult(v, sendText(v)), nil
	})

	add(s, &mcp.Tool{
		Name: ToolGetOperationStatus, Title: "Get an operation's status",
		Description: "Get the current status of one of your operations: who was notified, who approved or rejected it (with the reason), its result or error, and next_step. " +
			"wait_seconds (0-30) long-polls: it returns as soon as the status changes, or after wait_seconds with the unchanged status; call it again to keep waiting. 0, or leaving it out, returns at once. " +
			"A large input value (a message body, an attachment, a request body) is shown as {omitted: true, bytes, sha256, head}; full: true returns the whole input. " +
			"It never approves anything and never returns a token or link.",
		Annotations: &mcp.ToolAnnotations{Title: "Get operation status", ReadOnlyHint: true},
	}, func(p map[string]*jsonschema.Schema) {
		p["wait_seconds"].Minimum = ptr(0.0)
		p["wait_seconds"].Maximum = ptr(float64(MaxWaitSeconds))
	}, func(ctx context.Context, b Backend, in statusArgs) (result, error) {
		if in.WaitSeconds < 0 || in.WaitSeconds > MaxWaitSeconds {
			return result{}, approval.FieldErrors{{Field: "wait_seconds", Reason: "must be a whole number of seconds from 0 to 30"}}.Err()
		}
		wait := time.Duration(in.WaitSeconds) * time.Second
		if fg, ok := b.(fullGetter); ok && in.Full {
			v, err := fg.GetFull(ctx, in.OperationKey, wait)
			if err != nil {
				return result{}, err
			}
			return fullResult(v, statusText(v, in.WaitSeconds)), nil
		}
		v, err := b.Get(ctx, in.OperationKey, wait)
		if err != nil {
			return result{}, err
		}
		if in.Full {
			return fullResult(v, statusText(v, in.WaitSeconds)), nil
		}
		return viewResult(v, statusText(v, in.WaitSeconds)), nil
	})

	add(s, &mcp.Tool{
		Name: ToolCancelOperation, Title: "Cancel an operation",
		Description: "Cancel one of your operations that is still a draft or waiting for approval; nothing will be done and approvers can no longer approve it. " +
			"Canceling a canceled operation returns it unchanged. It is refused with invalid_state once the operation was approved, has run, or has ended otherwise.",
		Annotations: &mcp.ToolAnnotations{Title: "Cancel an operation", ReadOnlyHint: false, IdempotentHint: true},
	}, nil, func(ctx context.Context, b Backend, in keyArgs) (result, error) {
		v, err := b.Cancel(ctx, in.OperationKey)
		if err != nil {
			return result{}, err
		}
		return viewResult(v, cancelText(v)), nil
	})

	statuses := make([]any, len(approval.Statuses))
	for i, st := range approval.Statuses {
		statuses[i] = string(st)
	}
	add(s, &mcp.Tool{
		Name: ToolListOperations, Title: "List your operations",
		Description: "List the operations you prepared (newest first, up to 200), optionally only those in one status, with their status and next_step. It never shows other agents' operations and never returns a token or link.",
		Annotations: &mcp.ToolAnnotations{Title: "List operations", ReadOnlyHint: true},
	}, func(p map[string]*jsonschema.Schema) {
		p["status"].Enum = statuses
	}, func(ctx context.Context, b Backend, in listArgs) (result, error) {
		views, err := b.List(ctx, approval.Status(in.Status))
		if err != nil {
			return result{}, err
		}
		return result{structured: ListResult{Operations: approval.CompactList(views)}, text: listText(views, in.Status)}, nil
	})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// prepare stores a draft of action with input.
func prepare(ctx context.Context, b Backend, action string, input map[string]any, idem string) (result, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return result{}, approval.Errorf(approval.CodeInvalidInput, "arguments cannot be encoded as JSON")
	}
	v, created, err := b.Prepare(ctx, approval.PrepareCall{Action: action, Input: raw, IdempotencyKey: idem})
	if err != nil {
		return result{}, err
	}
	return viewResult(v, prepareText(v, created)), nil
}
