package httpreq

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/countersign/countersign/approval"
)

var _ approval.Editor = (*Action)(nil)

// maxEditable bounds the fields one operation offers for editing: a body
// with thousands of leaves would make a form nobody can review.
const maxEditable = 100

// Editable: an approver may change the values in the body (SPEC §10),
// never the target, method, path or query: where a write goes stays what
// the agent asked for. Each leaf of a JSON object body is a field named
// by its path ("body.title", "body.time.start"; "items.3.body.title" in
// a bulk); a string is edited as text, any other value as JSON. A body
// that is not an object is one field, "body", edited as JSON.
func (a *Action) Editable(op *approval.Operation) []approval.EditableField {
	r, err := decodeStored(op.Input)
	if err != nil {
		return nil
	}
	var out []approval.EditableField
	for prefix, it := range editTargets(r) {
		for _, f := range bodyFields(it.Body) {
			if len(out) == maxEditable {
				return out
			}
			f.Name = prefix + f.Name
			if prefix != "" {
				f.Label = "Item " + strings.TrimSuffix(strings.TrimPrefix(prefix, "items."), ".") + ", " + f.Label
			}
			out = append(out, f)
		}
	}
	return out
}

// editTargets yields the requests whose bodies may be edited, with the
// prefix of their field names.
func editTargets(r *Request) func(func(string, *Request) bool) {
	return func(yield func(string, *Request) bool) {
		if !r.bulk() {
			yield("", r)
			return
		}
		for i, it := range r.Items {
			if !yield("items."+strconv.Itoa(i+1)+".", it) {
				return
			}
		}
	}
}

// bodyFields lists the editable fields of one body.
func bodyFields(body json.RawMessage) []approval.EditableField {
	if len(body) == 0 {
		return nil
	}
	doc, err := decodeJSON(body)
	if err != nil {
		return nil
	}
	obj, ok := doc.(map[string]any)
	if !ok || len(obj) == 0 {
		return []approval.EditableField{{Name: "body", Label: "Body (JSON)", Value: string(canonical(doc)), Long: true}}
	}
	var out []approval.EditableField
	for _, l := range leaves(obj, nil) {
		name := "body." + l.path.String()
		if s, ok := l.value.(string); ok {
			out = append(out, approval.EditableField{Name: name, Label: l.path.String(), Value: s,
				Long: len(s) > 120 || strings.Contains(s, "\n")})
			continue
		}
		v := string(canonical(l.value))
		out = append(out, approval.EditableField{Name: name, Label: l.path.String() + " (JSON)", Value: v, Long: len(v) > 120})
		if len(out) == maxEditable {
			break
		}
	}
	return out
}

// EditInput is op's request with the edited body values. It goes through
// Prepare again: the path is checked, the state read afresh, and the new
// version is bound to the resource as it is now.
func (a *Action) EditInput(op *approval.Operation, changes map[string]string) (json.RawMessage, error) {
	r, err := decodeStored(op.Input)
	if err != nil {
		return nil, approval.Errorf(approval.CodeInvalidState, "the stored request is unreadable")
	}
	editable := map[string]bool{}
	for _, f := range a.Editable(op) {
		editable[f.Name] = true
	}
	// A field's name is its dotted path, which cannot say which dots
	// separate members ("body.a.b" is the member "a.b" or "b" in "a"):
	// the path is looked up from the body's own members, never split
	// from the name (guarantee 13).
	paths := map[string]fieldPath{}
	for prefix, it := range editTargets(r) {
		if doc, err := decodeJSON(it.Body); err == nil {
			if obj, ok := doc.(map[string]any); ok {
				for _, l := range leaves(obj, nil) {
					paths[prefix+"body."+l.path.String()] = l.path
				}
			}
		}
	}
	docs := map[*Request]any{}
	for name, v := range changes {
		if !editable[name] {
			return nil, approval.EditError(name)
		}
		it, field := r, name
		if r.bulk() {
			n, rest, _ := strings.Cut(strings.TrimPrefix(name, "items."), ".")
			i, _ := strconv.Atoi(n) // editable names are well formed
			it, field = r.Items[i-1], rest
		}
		doc, ok := docs[it]
		if !ok {
			doc, _ = decodeJSON(it.Body) // editable, so it decodes
		}
		path := paths[name]
		val, err := editedValue(doc, field, path, v)
		if err != nil {
			return nil, approval.FieldErrors{{Field: name, Reason: err.Error()}}.Err()
		}
		if field == "body" {
			doc = val
		} else {
			set(doc.(map[string]any), path, val)
		}
		docs[it] = doc
	}
	for it, doc := range docs {
		it.Body = canonical(doc)
	}
	return json.Marshal(r)
}

// editedValue is the new value of field: the text itself where the value
// was a string, else the edit read as JSON.
func editedValue(doc any, field string, path fieldPath, v string) (any, error) {
	if field != "body" {
		if old, _ := lookup(doc, path); old != nil {
			if _, ok := old.(string); ok {
				return v, nil
			}
		}
	}
	val, err := decodeJSON([]byte(v))
	if err != nil {
		return nil, errNotJSON
	}
	return val, nil
}

var errNotJSON = editError("is not valid JSON (this value is edited as JSON: a number, true, false, null, a list or an object)")

type editError string

func (e editError) Error() string { return string(e) }
