package httpreq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/countersign/countersign/approval"
)

// Field paths name a value inside a JSON object: "title", or "time.start"
// for a nested field. Arrays, scalars and empty objects are leaves; a
// path never goes into an array.
type fieldPath []string

func (p fieldPath) String() string { return strings.Join(p, ".") }

func parseField(s string) fieldPath { return strings.Split(s, ".") }

type leaf struct {
	path  fieldPath
	value any
}

// leaves lists the leaf values of obj in path order.
func leaves(obj map[string]any, prefix fieldPath) []leaf {
	var out []leaf
	for _, k := range sortedKeys(obj) {
		p := append(append(fieldPath{}, prefix...), k)
		if sub, ok := obj[k].(map[string]any); ok && len(sub) > 0 {
			out = append(out, leaves(sub, p)...)
			continue
		}
		out = append(out, leaf{p, obj[k]})
	}
	return out
}

// checkKeys refuses object keys that would make field paths ambiguous.
func checkKeys(v any, prefix string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	for k, sub := range obj {
		if k == "" || strings.Contains(k, ".") {
			return fmt.Errorf("field name %q at %q: empty names and names containing \".\" are not supported", k, strings.TrimPrefix(prefix, "."))
		}
		if err := checkKeys(sub, prefix+"."+k); err != nil {
			return err
		}
	}
	return nil
}

// lookup finds the value at p; ok is false when it is absent.
func lookup(doc any, p fieldPath) (any, bool) {
	cur := doc
	for _, k := range p {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// set puts v at p, creating objects on the way (and replacing non-objects).
func set(doc map[string]any, p fieldPath, v any) {
	cur := doc
	for _, k := range p[:len(p)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[p[len(p)-1]] = v
}

// remove deletes the value at p, if present.
func remove(doc map[string]any, p fieldPath) {
	cur := doc
	for _, k := range p[:len(p)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return
		}
		cur = next
	}
	delete(cur, p[len(p)-1])
}

// decodeJSON decodes keeping numbers exact.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}

// canonical is v as canonical JSON (RFC 8785).
func canonical(v any) json.RawMessage {
	c, err := approval.Canonical(v)
	if err != nil {
		// Values here come from decoded JSON; they always encode.
		panic(fmt.Sprintf("httpreq: canonical: %v", err))
	}
	return c
}

// snapshot is the state an operation is bound to: the values of a list of
// fields of the target's resource. Absent fields have no entry in Values
// (and a JSON null is an entry), so "absent" and "null" differ.
type snapshot struct {
	Fields []string                   `json:"fields"`
	Values map[string]json.RawMessage `json:"values"`
}

// take reads fields out of doc.
func take(doc any, fields []string) *snapshot {
	s := &snapshot{Fields: fields, Values: map[string]json.RawMessage{}}
	for _, f := range fields {
		if v, ok := lookup(doc, parseField(f)); ok {
			s.Values[f] = canonical(v)
		}
	}
	return s
}

// hash is the state hash: SHA-256 of the snapshot's canonical JSON.
func (s *snapshot) hash() string {
	h, err := approval.StateHash(s)
	if err != nil {
		panic(fmt.Sprintf("httpreq: state hash: %v", err))
	}
	return h
}

func (s *snapshot) raw() json.RawMessage { return canonical(s) }

func decodeSnapshot(raw json.RawMessage) (*snapshot, error) {
	var s snapshot
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	if s.Values == nil {
		s.Values = map[string]json.RawMessage{}
	}
	return &s, nil
}

// changes lists the fields whose values differ from s to now, as a diff
// (before = s, after = now; nil = absent).
func (s *snapshot) changes(now *snapshot) []approval.Change {
	var out []approval.Change
	for _, f := range s.Fields {
		b, a := s.Values[f], now.Values[f]
		if !bytes.Equal(b, a) {
			out = append(out, approval.Change{Field: f, Before: b, After: a})
		}
	}
	return out
}

// maxDiff bounds the rows of a preview's diff, and maxDiffBytes what they
// hold (field names and values) past the first row; the state binding
// still covers every field, and the body is shown whole.
const (
	maxDiff      = 200
	maxDiffBytes = 32 << 10
)

// plan is what a write does to the resource, worked out at prepare from
// the body and the current resource: the diff to show, and the fields the
// state binding covers.
type plan struct {
	diff      []approval.Change
	fields    []string
	truncated bool
}

// planWrite computes the field-level diff and the fields to bind.
//
//   - PATCH: one row for each field the body sets (nested objects are
//     followed to their leaves; arrays are compared whole); before is the
//     current value or absent, after is what the body sends (a JSON null
//     reads null: with merge-patch it removes the field).
//   - PUT replaces the resource: the fields the body sets, and the current
//     fields it leaves out (after: absent).
//   - DELETE: the bound fields, each going away.
//
// The binding covers the target's configured fields plus every field in
// the diff, so that whatever the human saw as "before" is what is checked.
func planWrite(method string, configured []string, body, cur any) plan {
	var p plan
	set := map[string]bool{}
	add := func(f string) {
		if !set[f] {
			set[f] = true
			p.fields = append(p.fields, f)
		}
	}
	for _, f := range configured {
		add(f)
	}
	row := func(path fieldPath) {
		f := path.String()
		add(f)
		c := approval.Change{Field: f}
		if v, ok := lookup(cur, path); ok {
			c.Before = canonical(v)
		}
		if v, ok := lookup(body, path); ok {
			c.After = canonical(v)
		}
		p.diff = append(p.diff, c)
	}
	curObj, _ := cur.(map[string]any)
	switch method {
	case "PATCH", "PUT":
		bodyObj, _ := body.(map[string]any)
		seen := map[string]bool{}
		for _, l := range leaves(bodyObj, nil) {
			seen[l.path.String()] = true
			row(l.path)
		}
		if method == "PUT" {
			for _, l := range leaves(curObj, nil) {
				if !seen[l.path.String()] {
					row(l.path)
				}
			}
		}
	case "DELETE":
		if len(configured) == 0 {
			for _, l := range leaves(curObj, nil) {
				add(l.path.String())
			}
		}
		for _, f := range p.fields {
			c := approval.Change{Field: f}
			if v, ok := lookup(cur, parseField(f)); ok {
				c.Before = canonical(v)
			}
			p.diff = append(p.diff, c)
		}
	}
	sort.Strings(p.fields)
	sort.SliceStable(p.diff, func(i, j int) bool { return p.diff[i].Field < p.diff[j].Field })
	size := 0
	for i, c := range p.diff {
		size += len(c.Field) + len(c.Before) + len(c.After)
		if i == maxDiff || (i > 0 && size > maxDiffBytes) { // the first row always shows
			p.diff, p.truncated = p.diff[:i], true
			break
		}
	}
	return p
}
