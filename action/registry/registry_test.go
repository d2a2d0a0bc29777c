package registry_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/action/hosttool"
	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/action/registry"
	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
)

// The names, scopes and tools are the contract's (SPEC §6): a change here
// is a change of the contract.
func TestRegistryPinsTheContract(t *testing.T) {
	if got, want := registry.Names(), []string{"email.send", "slack.post_message", "slack.delete_message", "http.request", "host.tool_call", "mcp.call", "allowance.grant"}; !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	tools := map[string]string{}
	var targets, undo []string
	for _, d := range registry.All {
		if d.Tool != nil {
			if prev, dup := tools[d.Tool.Name]; dup {
				t.Errorf("tool %s declared by %s and %s", d.Tool.Name, prev, d.Name)
			}
			tools[d.Tool.Name] = d.Name
			if d.Tool.Title == "" || d.Tool.Description == "" {
				t.Errorf("%s: tool %s needs a title and a description", d.Name, d.Tool.Name)
			}
		}
		if d.Targets {
			targets = append(targets, d.Name)
		}
		if d.Undo {
			undo = append(undo, d.Name)
		}
	}
	if want := map[string]string{"prepare_email": "email.send", "prepare_slack_message": "slack.post_message",
		"prepare_http_request": "http.request"}; !maps.Equal(tools, want) {
		t.Errorf("tools %v, want %v", tools, want)
	}
	if !slices.Equal(targets, []string{"http.request", "mcp.call"}) || !slices.Equal(undo, []string{"slack.post_message", "http.request"}) {
		t.Errorf("on targets %v, undoable %v", targets, undo)
	}
	var toolCalls []string
	for _, d := range registry.All {
		if d.ToolCalls {
			toolCalls = append(toolCalls, d.Name)
		}
	}
	if !slices.Equal(toolCalls, []string{"host.tool_call", "mcp.call"}) {
		t.Errorf("tool-call actions %v", toolCalls)
	}
	if _, ok := registry.Lookup("email.sent"); ok {
		t.Error("Lookup found an unregistered name")
	}
}

// An action declares Undo exactly when it can produce an undo
// (approval.Undoer): prepare_undo is offered by that flag.
func TestUndoMatchesTheActions(t *testing.T) {
	impls := map[string]approval.Action{
		email.Name: (*email.Action)(nil), slackpost.Name: (*slackpost.Action)(nil),
		slackpost.DeleteName: (*slackpost.Delete)(nil), httpreq.Name: (*httpreq.Action)(nil),
		hosttool.Name: (*hosttool.Action)(nil), mcpcall.Name: (*mcpcall.Action)(nil),
	}
	for _, d := range registry.All {
		a, ok := impls[d.Name]
		if !ok {
			continue // allowance.grant: the domain's own
		}
		_, undoer := a.(approval.Undoer)
		if undoer != d.Undo {
			t.Errorf("%s: Undo %v, but implements approval.Undoer: %v", d.Name, d.Undo, undoer)
		}
	}
	if len(impls) != len(registry.All)-1 {
		t.Errorf("registry has %d actions, this test knows %d and allowance.grant", len(registry.All), len(impls))
	}
}
