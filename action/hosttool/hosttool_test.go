package hosttool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/action/hosttool"
	"github.com/countersign/countersign/approval"
)

var agent = &approval.Principal{ID: "coder", Scopes: []string{hosttool.Name}}

func prepare(t *testing.T, in string) *approval.Prepared {
	t.Helper()
	p, err := hosttool.New().Prepare(context.Background(), approval.PrepareRequest{Principal: agent, Input: json.RawMessage(in)})
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	return p
}

// The preview shows the host, the tool and every argument exactly as
// given (strings as they are, other values as JSON), and is rendered again
// from the stored input without a difference.
func TestPreviewShowsEachArgumentExactly(t *testing.T) {
	in := `{"host":"claude-code","tool":"Bash","cwd":"/home/dev/app","session":"s-1","tool_input":{
		"command":"rm -rf build/ &&\necho \u202edone","timeout":120000,"run_in_background":false,"env":{"A":"1"},"files":["a","b"]}}`
	p := prepare(t, in)
	got := map[string]approval.Field{}
	for _, f := range p.Preview.Fields {
		got[f.Name] = f
	}
	for name, want := range map[string]string{
		"host": "claude-code", "tool": "Bash", "cwd": "/home/dev/app", "session": "s-1",
		"args.command": "rm -rf build/ &&\necho \u202edone", "args.timeout": "120000", "args.run_in_background": "false",
		"args.env": "{\n  \"A\": \"1\"\n}", "args.files": "[\n  \"a\",\n  \"b\"\n]",
	} {
		if got[name].Value != want {
			t.Errorf("field %s = %q, want %q", name, got[name].Value, want)
		}
	}
	if !got["args.command"].Long || got["args.timeout"].Long {
		t.Errorf("a multi-line argument is a block, a number is not: %+v", p.Preview.Fields)
	}
	if !strings.Contains(p.Preview.Summary, "countersign runs nothing") {
		t.Errorf("summary: %q", p.Preview.Summary)
	}
	canon, err := approval.Canonical(p.Input)
	if err != nil {
		t.Fatal(err)
	}
	again, err := hosttool.New().Preview(canon)
	if err != nil || !again.Equal(p.Preview) {
		t.Fatalf("stored preview differs:\n%+v\n%+v (%v)", p.Preview, again, err)
	}
}

// Routes read host, tool, cwd and every argument as args.PATH; what
// cannot be read as one string is marked, never left out.
func TestAttributes(t *testing.T) {
	p := prepare(t, `{"host":"claude-code","tool":"mcp__github__create_issue","cwd":"/repo",
		"tool_input":{"repo":"acme/app","labels":["bug"],"options":{"draft":true,"count":2}}}`)
	for k, want := range map[string]string{
		"host": "claude-code", "tool": "mcp__github__create_issue", "cwd": "/repo", "args.repo": "acme/app",
		"args.options.draft": "true", "args.options.count": "2", "args": approval.AttrObject, "args.labels": approval.AttrOpaque("list"),
	} {
		if p.Attrs[k] != want {
			t.Errorf("attr %s = %q, want %q (all: %q)", k, p.Attrs[k], want, p.Attrs)
		}
	}
}

// A route on tool and on an argument picks the call; the rest go on.
func TestRoutesMatchToolAndArguments(t *testing.T) {
	pol := &approval.Policy{
		Approvers:  []*approval.Approver{{ID: "ada"}, {ID: "grace"}},
		Principals: []*approval.Principal{agent},
		Routes: []approval.RouteRule{
			{Name: "prod writes", Match: approval.Match{Action: hosttool.Name, Tool: "Write",
				When: []approval.Condition{{Attr: "args.file_path", Op: approval.OpMatches, Values: []string{"/srv/prod/*"}}}},
				ApproverIDs: []string{"ada"}},
			{Name: "shell", Match: approval.Match{Action: hosttool.Name, Tool: "Bash"}, ApproverIDs: []string{"grace"}},
		},
	}
	for _, c := range []struct{ tool, input, route string }{
		{"Write", `{"file_path":"/srv/prod/app.env","content":"x"}`, "prod writes"},
		{"Bash", `{"command":"ls"}`, "shell"},
		{"Write", `{"file_path":"/home/dev/notes.txt","content":"x"}`, ""},
		{"Write", `{"file_path":["/srv/prod/app.env"],"content":"x"}`, "prod writes"}, // a list cannot dodge it
	} {
		p := prepare(t, fmt.Sprintf(`{"host":"claude-code","tool":%q,"tool_input":%s}`, c.tool, c.input))
		r, err := pol.Resolve(hosttool.Name, agent, p.Attrs)
		switch {
		case c.route == "" && approval.ErrorCode(err) != approval.CodeNoRoute:
			t.Errorf("%s %s: route %q, %v; want no_route", c.tool, c.input, r.Name, err)
		case c.route != "" && (err != nil || r.Name != c.route):
			t.Errorf("%s %s: route %q, %v; want %q", c.tool, c.input, r.Name, err, c.route)
		}
	}
	if m := (approval.Match{Action: hosttool.Name, Tool: "Bash"}); m.String() != "action=host.tool_call tool=Bash" {
		t.Errorf("match renders as %q", m.String())
	}
}

func TestBadInputIsRefusedByField(t *testing.T) {
	for _, c := range []struct{ in, field string }{
		{`{"tool":"Bash","tool_input":{}}`, "host"},
		{`{"host":"Claude Code","tool":"Bash","tool_input":{}}`, "host"},
		{`{"host":"claude-code","tool_input":{}}`, "tool"},
		{`{"host":"claude-code","tool":"rm -rf","tool_input":{}}`, "tool"},
		{`{"host":"claude-code","tool":"Bash"}`, "tool_input"},
		{`{"host":"claude-code","tool":"Bash","tool_input":null}`, "tool_input"},
		{`{"host":"claude-code","tool":"Bash","tool_input":["ls"]}`, "tool_input"},
		{`{"host":"claude-code","tool":"Bash","tool_input":"ls"}`, "tool_input"},
		{`{"host":"claude-code","tool":"Bash","tool_input":{},"cwd":"/a\nb"}`, "cwd"},
		{`{"host":"claude-code","tool":"Bash","tool_input":{},"session":"a\u0007"}`, "session"},
		{`{"host":"claude-code","tool":"Bash","tool_input":{},"run":true}`, "run"},
		{`[]`, "input"},
	} {
		_, err := hosttool.New().Prepare(context.Background(), approval.PrepareRequest{Principal: agent, Input: json.RawMessage(c.in)})
		var e *approval.Error
		if !errors.As(err, &e) || e.Code != approval.CodeInvalidInput {
			t.Errorf("%s: %v, want invalid_input", c.in, err)
			continue
		}
		fields, _ := json.Marshal(e.Details["fields"])
		if !strings.Contains(string(fields), `"field":"`+c.field+`"`) {
			t.Errorf("%s: fields %s, want %s", c.in, fields, c.field)
		}
	}
}

// Execution runs nothing and records so; the receipt is left out only
// where the service signs none.
func TestExecuteRunsNothing(t *testing.T) {
	p := prepare(t, `{"host":"langgraph","tool":"write_file","tool_input":{"path":"/tmp/x"}}`)
	in, err := approval.Canonical(p.Input)
	if err != nil {
		t.Fatal(err)
	}
	res, err := hosttool.New().Execute(context.Background(), &approval.Operation{Key: "op_x", Action: hosttool.Name, Input: in})
	if err != nil {
		t.Fatal(err)
	}
	var r hosttool.Result
	if err := json.Unmarshal(res, &r); err != nil || r.RunBy != "langgraph" || !strings.Contains(r.Note, "countersign ran nothing") || r.Receipt != "" {
		t.Fatalf("result %s (%v)", res, err)
	}
}
