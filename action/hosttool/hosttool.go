// Package hosttool is the host.tool_call action (SPEC §13): an agent host
// (Claude Code through `countersign hook claude-code`, an OpenAI Agents SDK
// tool's needsApproval, a LangGraph interrupt) asks a human to approve one
// exact tool call before it runs it itself.
//
// Input:
//
//	{"host": "claude-code", "tool": "Bash", "tool_input": {"command": "…"}, "cwd": "/repo"?, "session": "…"?}
//
// countersign executes nothing: once approved, the operation succeeds as
// soon as a worker claims it (so the kill switch keeps it waiting), and its
// result carries a receipt (audience: the host) that binds the decision to
// the payload hash, the exact input. The host runs the tool.
//
// Routes match "host", "tool" and every value of the tool's input as
// "args.PATH" ("args.command", "args.file_path"), like an MCP tool call's
// arguments; "cwd" too.
package hosttool

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/approval"
)

// Name is the action's contract name; it is also the scope a principal
// needs.
const Name = "host.tool_call"

// Input is the normalized input.
type Input struct {
	Host      string          `json:"host"`
	Tool      string          `json:"tool"`
	ToolInput json.RawMessage `json:"tool_input"`
	Cwd       string          `json:"cwd,omitempty"`
	Session   string          `json:"session,omitempty"`
}

// Result is what a succeeded host.tool_call records: that countersign ran
// nothing, and the receipt the host may keep or check.
type Result struct {
	RunBy   string `json:"run_by"`
	Note    string `json:"note"`
	Receipt string `json:"receipt,omitempty"`
}

// Action is host.tool_call.
type Action struct{}

var (
	_ approval.Action    = (*Action)(nil)
	_ approval.Previewer = (*Action)(nil)
)

// New builds host.tool_call; it needs no configuration.
func New() *Action { return &Action{} }

// Name implements approval.Action.
func (*Action) Name() string { return Name }

var (
	hostPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	// Tool names as hosts spell them: Bash, mcp__github__create_issue,
	// a function name.
	toolPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$`)
)

// Limits of the small fields.
const (
	maxCwd     = 4096
	maxSession = 256
)

// Prepare validates and normalizes the call and reports its attributes.
// It reads nothing and runs nothing.
//
// Returns invalid_input.
func (a *Action) Prepare(_ context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	in, args, err := decode(req.Input)
	if err != nil {
		return nil, err
	}
	attrs := map[string]string{"host": in.Host, "tool": in.Tool}
	if in.Cwd != "" {
		attrs["cwd"] = approval.TextAttr(in.Cwd)
	}
	approval.NewAttrSet(attrs).AddJSON([]string{"args"}, args)
	return &approval.Prepared{Input: in, Preview: Preview(in, args), Attrs: attrs}, nil
}

// decode reads and checks the input; args is the tool's input decoded
// (numbers as json.Number).
func decode(raw json.RawMessage) (Input, map[string]any, error) {
	var in Input
	if err := approval.DecodeInput(raw, &in, "must be an object {host, tool, tool_input, cwd?, session?}"); err != nil {
		return in, nil, err
	}
	var fe approval.FieldErrors
	if !hostPattern.MatchString(in.Host) {
		fe.Add("host", "required: the agent host, lower case letters, digits and dashes (claude-code, openai-agents, langgraph)")
	}
	if !toolPattern.MatchString(in.Tool) {
		fe.Add("tool", "required: the tool's name as the host calls it (letters, digits, _ . : -; at most 128)")
	}
	var args map[string]any
	d := json.NewDecoder(bytes.NewReader(in.ToolInput))
	d.UseNumber()
	if len(in.ToolInput) == 0 || d.Decode(&args) != nil || args == nil {
		fe.Add("tool_input", "required: the tool's arguments as a JSON object")
	}
	if in.Cwd != "" && (!utf8.ValidString(in.Cwd) || len(in.Cwd) > maxCwd || strings.ContainsAny(in.Cwd, "\x00\r\n")) {
		fe.Add("cwd", "must be a directory path of at most %d bytes on one line", maxCwd)
	}
	if in.Session != "" && (!utf8.ValidString(in.Session) || len(in.Session) > maxSession || approval.TextAttr(in.Session) != in.Session) {
		fe.Add("session", "must be one line of at most %d bytes", maxSession)
	}
	return in, args, fe.Err()
}

// Preview implements approval.Previewer: the preview is a function of the
// stored input alone.
func (a *Action) Preview(input json.RawMessage) (approval.Preview, error) {
	in, args, err := decode(input)
	if err != nil {
		return approval.Preview{}, err
	}
	return Preview(in, args), nil
}

// Preview shows the host, the tool and each argument exactly: a string as
// it is, any other value as its JSON. Channels escape and fence every
// value (approval's one renderer for agent-chosen strings).
func Preview(in Input, args map[string]any) approval.Preview {
	p := approval.Preview{
		Title: "Let " + in.Host + " run the tool " + in.Tool,
		Summary: "The agent host " + in.Host + " asks to run this tool call with exactly these arguments. " +
			"If you approve, the host runs it itself on its own machine; countersign runs nothing.",
		Fields: []approval.Field{
			{Name: "host", Label: "Agent host", Value: in.Host},
			{Name: "tool", Label: "Tool", Value: in.Tool},
		},
	}
	if in.Cwd != "" {
		p.Fields = append(p.Fields, approval.Field{Name: "cwd", Label: "Working directory", Value: in.Cwd})
	}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		v, long := approval.ShowArg(args[k])
		p.Fields = append(p.Fields, approval.Field{Name: "args." + k, Label: k, Value: v, Long: long})
	}
	if len(args) == 0 {
		p.Fields = append(p.Fields, approval.Field{Name: "args", Label: "Arguments", Value: "(none)"})
	}
	if in.Session != "" {
		p.Fields = append(p.Fields, approval.Field{Name: "session", Label: "Session", Value: in.Session})
	}
	return p
}

// Execute runs nothing: the host runs the tool once it reads that the
// operation succeeded. It records the receipt of the decision.
func (a *Action) Execute(ctx context.Context, op *approval.Operation) (json.RawMessage, error) {
	var in Input
	if err := json.Unmarshal(op.Input, &in); err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "stored input is unreadable"}
	}
	tok, err := approval.CountersignerFrom(ctx).Mint(approval.ReceiptRequest{Audience: in.Host})
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "could not sign the receipt; the host must not run the tool"}
	}
	return json.Marshal(Result{RunBy: in.Host,
		Note:    "countersign ran nothing: " + in.Host + " runs this tool call itself, now that it is approved",
		Receipt: tok})
}
