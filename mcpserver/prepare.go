package mcpserver

// The prepare tools of the actions (action/registry): each action declares
// its tool's name, title and description (action.Descriptor.Tool); here are
// the tool's arguments and how they become the action's input.

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/countersign/countersign/action"
	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/action/registry"
	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// prepareTools add the prepare tool of each action that has one, by the
// action's name. A registered action with a tool and no entry here fails
// NewServer (and every test of this package).
var prepareTools = map[string]func(*server, *mcp.Tool){
	email.Name:     addPrepareEmail,
	slackpost.Name: addPrepareSlackMessage,
	httpreq.Name:   addPrepareHTTPRequest,
}

// addPrepareTools adds the prepare tools, in the order of the registry.
func (s *server) addPrepareTools() {
	for _, d := range registry.All {
		if d.Tool == nil {
			continue
		}
		addTool, ok := prepareTools[d.Name]
		if !ok {
			panic("mcpserver: action " + d.Name + " declares tool " + d.Tool.Name + " but mcpserver has no arguments for it (prepareTools)")
		}
		addTool(s, prepareTool(d.Tool))
	}
}

// prepareTool is the MCP tool of an action's declared tool: its words,
// then the words every prepare tool shares.
func prepareTool(t *action.Tool) *mcp.Tool {
	return &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description + " " + prepareTail,
		Annotations: prepareAnnotations(t.Title)}
}

// prepareToolNames are the names of the prepare tools, in the order of
// the registry.
func prepareToolNames() []string {
	var out []string
	for _, d := range registry.All {
		if d.Tool != nil {
			out = append(out, d.Tool.Name)
		}
	}
	return out
}

// attachmentArg is one file of prepare_email.
type attachmentArg struct {
	Name          string `json:"name" jsonschema:"file name the recipient sees, e.g. invoice-2026-12.pdf (without any of \" / \\ : < > ? |)"`
	ContentType   string `json:"content_type" jsonschema:"media type of the file, e.g. application/pdf"`
	ContentBase64 string `json:"content_base64" jsonschema:"the file's bytes in standard base64 (RFC 4648, with padding)"`
}

type emailArgs struct {
	To      []string `json:"to" jsonschema:"recipient email addresses"`
	Cc      []string `json:"cc,omitempty" jsonschema:"carbon-copy addresses"`
	Bcc     []string `json:"bcc,omitempty" jsonschema:"blind-carbon-copy addresses"`
	Subject string   `json:"subject" jsonschema:"subject line"`
	Text    string   `json:"text" jsonschema:"plain-text body, sent exactly as given"`
	HTML    string   `json:"html,omitempty" jsonschema:"optional HTML body, sent as an alternative to text"`
	ReplyTo string   `json:"reply_to,omitempty" jsonschema:"optional Reply-To address"`
	// Attachments go to the action as given, which refuses unknown fields.
	Attachments    json.RawMessage `json:"attachments,omitempty" jsonschema:"optional files to attach (by default at most 5, 5 MiB together, within the request size limit); the approver sees each one's name, type, size and SHA-256"`
	IdempotencyKey string          `json:"idempotency_key,omitempty" jsonschema:"optional key (1-128 printable ASCII characters, no spaces) that makes retrying this prepare safe"`
}

type slackArgs struct {
	Channel        string `json:"channel" jsonschema:"Slack channel: a name such as #general or an id such as C0123456789"`
	Text           string `json:"text" jsonschema:"message text (Slack mrkdwn), posted exactly as given"`
	ThreadTS       string `json:"thread_ts,omitempty" jsonschema:"optional ts of a message to reply to in its thread"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"optional key (1-128 printable ASCII characters, no spaces) that makes retrying this prepare safe"`
}

type httpArgs struct {
	Target         string          `json:"target" jsonschema:"name of an HTTP target configured on the countersign service (credentials stay on the service)"`
	Method         string          `json:"method,omitempty" jsonschema:"HTTP method, e.g. PATCH, PUT, POST or DELETE; the target's allow list decides. Required unless items is given"`
	Path           string          `json:"path,omitempty" jsonschema:"path under the target's base URL, e.g. /events/42. Required unless items is given"`
	Query          json.RawMessage `json:"query,omitempty" jsonschema:"optional query parameters: an object of name to a string or a list of strings"`
	Body           json.RawMessage `json:"body,omitempty" jsonschema:"optional JSON request body"`
	Items          json.RawMessage `json:"items,omitempty" jsonschema:"bulk: instead of method, path, query and body, a list of 1 to 100 requests to the one target, each {method, path, query?, body?}; they are approved together, with one preview and one decision, and written in order"`
	IdempotencyKey string          `json:"idempotency_key,omitempty" jsonschema:"optional key (1-128 printable ASCII characters, no spaces) that makes retrying this prepare safe"`
}

func addPrepareEmail(s *server, t *mcp.Tool) {
	add(s, t, func(p map[string]*jsonschema.Schema) {
		p["attachments"] = &jsonschema.Schema{Type: "array", Description: p["attachments"].Description,
			Items: mustSchema[attachmentArg](nil)}
	}, func(ctx context.Context, b Backend, in emailArgs) (result, error) {
		input := map[string]any{"to": in.To, "cc": orEmpty(in.Cc), "bcc": orEmpty(in.Bcc), "subject": in.Subject, "text": in.Text}
		if in.HTML != "" {
			input["html"] = in.HTML
		}
		if in.ReplyTo != "" {
			input["reply_to"] = in.ReplyTo
		}
		if a := bytes.TrimSpace(in.Attachments); len(a) > 0 && string(a) != "null" {
			input["attachments"] = json.RawMessage(a)
		}
		return prepare(ctx, b, ActionEmailSend, input, in.IdempotencyKey)
	})
}

func addPrepareSlackMessage(s *server, t *mcp.Tool) {
	add(s, t, nil, func(ctx context.Context, b Backend, in slackArgs) (result, error) {
		input := map[string]any{"channel": in.Channel, "text": in.Text}
		if in.ThreadTS != "" {
			input["thread_ts"] = in.ThreadTS
		}
		return prepare(ctx, b, ActionSlackPostMessage, input, in.IdempotencyKey)
	})
}

func addPrepareHTTPRequest(s *server, t *mcp.Tool) {
	add(s, t, func(p map[string]*jsonschema.Schema) {
		p["method"].Enum = []any{"POST", "PUT", "PATCH", "DELETE"}
		p["query"] = &jsonschema.Schema{Type: "object", Description: p["query"].Description,
			AdditionalProperties: &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
				{Type: "string"}, {Type: "array", Items: &jsonschema.Schema{Type: "string"}}}}}
		p["body"] = anyJSON(p["body"].Description + " (any JSON value; usually an object)")
		p["items"] = &jsonschema.Schema{Type: "array", Description: p["items"].Description, MinItems: ptr(1), MaxItems: ptr(MaxBulkItems),
			Items: &jsonschema.Schema{Type: "object", Required: []string{"method", "path"}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
				Properties: map[string]*jsonschema.Schema{
					"method": {Type: "string", Enum: []any{"POST", "PUT", "PATCH", "DELETE"}},
					"path":   {Type: "string", Description: p["path"].Description},
					"query":  p["query"],
					"body":   anyJSON("the item's JSON body (any JSON value; usually an object)"),
				}}}
	}, func(ctx context.Context, b Backend, in httpArgs) (result, error) {
		input := map[string]any{"target": in.Target}
		// Pass what was given, so that the action refuses items mixed with
		// single-request fields rather than one silently winning.
		if in.Method != "" {
			input["method"] = in.Method
		}
		if in.Path != "" {
			input["path"] = in.Path
		}
		if items := bytes.TrimSpace(in.Items); len(items) > 0 && string(items) != "null" {
			input["items"] = json.RawMessage(items)
		} else {
			var fe approval.FieldErrors
			if in.Method == "" {
				fe.Add("method", "required (unless items is given)")
			}
			if in.Path == "" {
				fe.Add("path", "required (unless items is given)")
			}
			if err := fe.Err(); err != nil {
				return result{}, err
			}
		}
		if q := bytes.TrimSpace(in.Query); len(q) > 0 && string(q) != "null" {
			if q[0] != '{' {
				return result{}, approval.FieldErrors{{Field: "query", Reason: "must be an object"}}.Err()
			}
			input["query"] = json.RawMessage(q)
		}
		if body := bytes.TrimSpace(in.Body); len(body) > 0 && string(body) != "null" {
			input["body"] = json.RawMessage(body)
		}
		return prepare(ctx, b, ActionHTTPRequest, input, in.IdempotencyKey)
	})
}
