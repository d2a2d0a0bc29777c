package mcpcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/upstream"
	"github.com/pmezard/go-difflib/difflib"
)

// stateRead is what the read tool of a state: binding returned.
type stateRead struct {
	tool string
	diff string // the guarded call's argument compared with it
	res  *upstream.Result
	hash string
}

// readState calls the read tool with its arguments filled in from the
// guarded call's. A read tool that answers with an error is a state too
// (a file that does not exist yet): the approval binds to that answer.
//
// Returns invalid_input (an argument the read needs is missing) and
// unavailable (the upstream is down or did not answer).
func (a *Action) readState(ctx context.Context, in Input, sr upstream.StateRead, args map[string]any) (*stateRead, error) {
	readArgs := map[string]any{}
	var fe approval.FieldErrors
	for k, v := range sr.Args {
		if name, ok := strings.CutPrefix(v, "{"); ok && strings.HasSuffix(name, "}") {
			name = strings.TrimSuffix(name, "}")
			val, has := args[name]
			if !has {
				fe.Add("arguments."+name, "required: the approval is bound to what %s returns for it", sr.Tool)
				continue
			}
			readArgs[k] = val
			continue
		}
		readArgs[k] = v
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(readArgs)
	if err != nil {
		return nil, err
	}
	res, err := a.up.Call(ctx, in.Upstream, sr.Tool, raw, nil)
	if err != nil {
		var ae *approval.Error
		if errors.As(err, &ae) {
			return nil, err
		}
		return nil, approval.Errorf(approval.CodeUnavailable, "the upstream %s did not answer the read of the current state (%s); try again later", in.Upstream, sr.Tool).
			WithDetails(map[string]any{"upstream": in.Upstream})
	}
	return &stateRead{tool: sr.Tool, diff: sr.Diff, res: res, hash: res.SHA256}, nil
}

// binding is the state binding the operation stores: the digest of the
// whole read and its size. What it said is in the preview already; a copy
// here would only add to what a small request makes countersign store
// (guarantee 10).
func (r *stateRead) binding() *approval.StateBinding {
	snap, _ := json.Marshal(map[string]any{"tool": r.tool, "is_error": r.res.IsError, "bytes": r.res.Bytes, "sha256": r.res.SHA256})
	return &approval.StateBinding{Hash: r.hash, Snapshot: snap}
}

// Bounds of the line diff: past them the preview says so instead.
const (
	maxDiffInput = 256 << 10
	maxDiffLines = 5000
	maxDiffShown = 24 << 10
)

// show adds what the read returned, and the line changes the call makes
// to the argument named by diff.
func (r *stateRead) show(p *approval.Preview, args map[string]any) {
	label := "What " + r.tool + " returns now (the server's words)"
	before := r.res.Text
	if r.res.IsError {
		label = r.tool + " answers now with an error (the server's words)"
		before = ""
	}
	now := r.res.Text
	if now == "" {
		now = "(nothing)"
	}
	p.Fields = append(p.Fields, approval.Field{Name: "state.now", Label: label, Value: cut(now, maxStateShown), Long: true, Bounded: true})
	p.Summary += " It is bound to what " + r.tool + " returns now: if that changes before the call, nothing is called."
	if r.diff == "" {
		return
	}
	after, ok := args[r.diff].(string)
	if !ok {
		return
	}
	var value string
	switch {
	case r.res.Cut || len(before) > maxDiffInput || len(after) > maxDiffInput ||
		strings.Count(before, "\n") > maxDiffLines || strings.Count(after, "\n") > maxDiffLines:
		value = fmt.Sprintf("(too long to compare line by line: %d bytes now, %d bytes after; both are shown in full above)", r.res.Bytes, len(after))
	case before == after:
		value = "(no change: " + r.diff + " is what " + r.tool + " returns now)"
	default:
		d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(before), B: difflib.SplitLines(after),
			FromFile: "now", ToFile: "after the call", Context: 3})
		if err != nil {
			return
		}
		value = cut(d, maxDiffShown)
	}
	// The diff holds the argument's lines too: they are the agent's, and
	// count against its request as the argument's own field does.
	p.Fields = append(p.Fields, approval.Field{Name: "state.diff", Label: "Line changes to " + r.diff + ": - now, + after the call",
		Value: value, Long: true, Bounded: true})
}
