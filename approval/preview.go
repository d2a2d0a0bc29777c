package approval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Previewer is implemented by actions whose preview is a function of the
// normalized input alone (email.send, slack.post_message). Their
// operations are stored without the preview, which would be a second copy
// of the input (roughly doubling what a pending operation costs), and the
// preview is rendered again from the input whenever one is read.
//
// Preview must be deterministic: the same input gives the same preview,
// the one Prepare returned. A later version of the action that renders
// differently changes the preview shown for stored operations too (never
// what they execute, nor their payload hash). An error means the stored
// input is unreadable; the operation is then refused, never shown with an
// empty preview.
type Previewer interface {
	Preview(input json.RawMessage) (Preview, error)
}

// previews decides which previews are left out of stored operations and
// renders them back on every read (previewing, in previewstore.go). A
// preview is left out only when rendering the input gives it back exactly,
// so nothing a human was shown is ever lost (a preview with more than the
// input says, such as a diff, is stored as before). It keeps the latest
// previews rendered, by operation key: an operation is read many times in
// its short life (every status read, page and worker step), and its input
// never changes.
type previews struct {
	actions   map[string]Action
	mu        sync.Mutex
	cur, prev map[string]Preview
}

// renderedGen bounds the previews kept: two generations of this many.
const renderedGen = 2048

// Omit reports whether op may be stored without its preview: its action
// renders exactly that preview again from the input.
func (p *previews) Omit(op *Operation) bool {
	pv, ok := optional[Previewer](p.actions[op.Action])
	if !ok || len(op.Input) == 0 {
		return false
	}
	again, err := pv.Preview(op.Input)
	if err != nil || !again.Equal(op.Preview) {
		return false
	}
	p.keep(op.Key, again)
	return true
}

// Fill renders the preview of an operation read without one (it does
// nothing to one read with its preview, or without input). An error means
// the stored input cannot be rendered: the read must fail. The error names
// the operation, never what the renderer said about its input.
func (p *previews) Fill(op *Operation) error {
	if op.Preview.Title != "" || len(op.Preview.Fields) > 0 || len(op.Input) == 0 {
		return nil // stored with its preview, or a draft that ended unsent (no input kept)
	}
	pv, ok := optional[Previewer](p.actions[op.Action])
	if !ok {
		return nil
	}
	if v, ok := p.kept(op.Key); ok {
		op.Preview = v
		return nil
	}
	v, err := pv.Preview(op.Input)
	if err != nil {
		return fmt.Errorf("approval: operation %s: its stored %s input cannot be rendered", op.Key, op.Action)
	}
	p.keep(op.Key, v)
	op.Preview = v
	return nil
}

func (p *previews) kept(key string) (Preview, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.cur[key]
	if !ok {
		if v, ok = p.prev[key]; ok {
			p.keepLocked(key, v)
		}
	}
	// Each reader gets its own slices: nobody's change reaches another.
	v.Fields, v.Warnings, v.Diff = slices.Clone(v.Fields), slices.Clone(v.Warnings), slices.Clone(v.Diff)
	v.WarningCodes = slices.Clone(v.WarningCodes)
	return v, ok
}

func (p *previews) keep(key string, v Preview) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keepLocked(key, v)
}

func (p *previews) keepLocked(key string, v Preview) {
	if p.cur == nil || len(p.cur) >= renderedGen {
		p.prev, p.cur = p.cur, make(map[string]Preview, 256)
	}
	p.cur[key] = v
}

// Equal reports whether two previews show the same.
func (p Preview) Equal(q Preview) bool {
	return p.Title == q.Title && p.Summary == q.Summary && slices.Equal(p.Fields, q.Fields) &&
		slices.Equal(p.Warnings, q.Warnings) && slices.Equal(p.WarningCodes, q.WarningCodes) && slices.EqualFunc(p.Diff, q.Diff, func(a, b Change) bool {
		return a.Field == b.Field && string(a.Before) == string(b.Before) && string(a.After) == string(b.After) &&
			(a.Before == nil) == (b.Before == nil) && (a.After == nil) == (b.After == nil)
	})
}

// ShowArg renders one argument of a tool call: a string exactly, anything else as indented
// JSON (numbers as written). long marks values shown as a block.
func ShowArg(v any) (string, bool) {
	if s, ok := v.(string); ok {
		return s, strings.Contains(s, "\n") || utf8.RuneCountInString(s) > 200
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return "(unreadable)", false
	}
	s := strings.TrimSuffix(buf.String(), "\n")
	return s, strings.Contains(s, "\n")
}
