package mcpcall

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/safetext"
	"github.com/countersign/countersign/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of the upstream's words in a preview: what a stored operation
// holds of them stays a small fixed amount on top of the agent's input
// (guarantee 10), however much the server says.
const (
	maxDescription = 4 << 10
	maxArgAbout    = 300
	maxStateShown  = 16 << 10
)

// preview shows the call exactly: server and tool by name, the tool's own
// description as the server's words, every argument with its exact value
// (labelled from the input schema), and where state is bound what the read
// tool returns now with the line changes the call makes.
func preview(in Input, tool upstream.Tool, args map[string]any, read *stateRead) approval.Preview {
	p := approval.Preview{
		Title: "Call the tool " + in.Tool + " on the MCP server " + in.Upstream,
		Summary: "An agent asks to call this tool of the MCP server " + in.Upstream + " with exactly these arguments. " +
			"If you approve, countersign calls it once, as shown, and only if the server still defines the tool as it does now.",
		Fields: []approval.Field{
			{Name: "upstream", Label: "MCP server", Value: in.Upstream},
			{Name: "tool", Label: "Tool", Value: in.Tool},
		},
	}
	def := tool.Def
	if def != nil && def.Title != "" {
		p.Fields = append(p.Fields, approval.Field{Name: "tool.title", Label: "The server's title for the tool", Value: cut(def.Title, maxArgAbout), Bounded: true})
	}
	if def != nil && def.Description != "" {
		p.Fields = append(p.Fields, approval.Field{Name: "tool.description", Label: "What the server says the tool does (its words, not countersign's)",
			Value: cut(def.Description, maxDescription), Long: true, Bounded: true})
	}
	props := schemaProps(def)
	var about []string
	for _, k := range slices.Sorted(maps.Keys(args)) {
		v, long := approval.ShowArg(args[k])
		label := k
		if pr, ok := props[k]; ok {
			if t, _ := pr["title"].(string); t != "" && t != k {
				label = cut(oneLine(t), maxArgAbout) + " (" + k + ")"
			}
			if d, _ := pr["description"].(string); d != "" {
				about = append(about, k+": "+cut(oneLine(d), maxArgAbout))
			}
		}
		p.Fields = append(p.Fields, approval.Field{Name: "args." + k, Label: label, Value: v, Long: long})
	}
	if len(args) == 0 {
		p.Fields = append(p.Fields, approval.Field{Name: "args", Label: "Arguments", Value: "(none)"})
	}
	if len(about) > 0 {
		p.Fields = append(p.Fields, approval.Field{Name: "args.about", Label: "What the server says the arguments mean (its words)",
			Value: cut(strings.Join(about, "\n"), maxDescription), Long: true, Bounded: true})
	}
	if read != nil {
		read.show(&p, args)
	}
	if def != nil && def.Annotations != nil && def.Annotations.ReadOnlyHint {
		p.Warn(approval.WarnNotice, "The server marks this tool as read-only. countersign does not take a server's word for that: it asks you to approve every call of a tool the policy does not let pass.")
	}
	return p
}

// schemaProps is the input schema's properties, as the client decoded it.
func schemaProps(def *mcp.Tool) map[string]map[string]any {
	out := map[string]map[string]any{}
	if def == nil {
		return out
	}
	s, ok := def.InputSchema.(map[string]any)
	if !ok {
		return out
	}
	props, _ := s["properties"].(map[string]any)
	for k, v := range props {
		if m, ok := v.(map[string]any); ok {
			out[k] = m
		}
	}
	return out
}

// checkArgs refuses arguments the tool's schema says it cannot take: a
// required argument missing, or an unknown one where the schema forbids
// others. The upstream checks the rest itself; what it refuses, it
// refuses before anything runs.
func checkArgs(tool upstream.Tool, args map[string]any) error {
	if tool.Def == nil {
		return nil
	}
	s, ok := tool.Def.InputSchema.(map[string]any)
	if !ok {
		return nil
	}
	var fe approval.FieldErrors
	req, _ := s["required"].([]any)
	for _, r := range req {
		if name, ok := r.(string); ok {
			if _, has := args[name]; !has {
				fe.Add("arguments."+cut(name, 64), "required by the tool's input schema")
			}
		}
		if len(fe) >= 10 {
			break
		}
	}
	if ap, ok := s["additionalProperties"].(bool); ok && !ap {
		props := schemaProps(tool.Def)
		for _, k := range slices.Sorted(maps.Keys(args)) {
			if _, known := props[k]; !known && len(fe) < 10 {
				fe.Add("arguments."+cut(k, 64), "the tool's input schema has no such argument")
			}
		}
	}
	return fe.Err()
}

// cut bounds foreign text so that it takes at most n bytes as people are
// shown it, every hidden character as its escape (safetext), saying so
// when it cuts: what a server says costs a fixed amount to show in every
// channel, whatever it is made of.
func cut(s string, n int) string {
	if shown(s) <= n {
		return s
	}
	lo, hi := 0, min(len(s), n) // the longest head whose escaped form fits
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if shown(strings.ToValidUTF8(s[:mid], "")) <= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return strings.ToValidUTF8(s[:lo], "") + fmt.Sprintf("… (cut: %d bytes in all)", len(s))
}

// shown is the size of s as people are shown it.
func shown(s string) int {
	out, _ := safetext.Escape(s, true)
	return len(out)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
