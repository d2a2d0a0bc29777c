package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/countersign/countersign/approval"
)

// decodeArgs reads a tool's arguments into T the way the REST API reads a
// body: every field the schema requires must be present and not null, every
// value must have its schema's type, and unknown fields are refused. It
// returns invalid_input listing the fields (details.fields), so that a model
// gets the contract's error rather than a validator's prose.
func decodeArgs[T any](raw json.RawMessage) (T, error) {
	var v T
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if err := approval.CheckJSONDepth(raw, ""); err != nil {
		return v, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return v, approval.Errorf(approval.CodeInvalidInput, "arguments must be a JSON object")
	}
	// Check each argument on its own, so that one answer lists every
	// missing, mistyped or unknown argument.
	var fe approval.FieldErrors
	known := map[string]bool{}
	for _, f := range jsonFields(reflect.TypeFor[T]()) {
		known[f.name] = true
		val, ok := fields[f.name]
		if !ok || string(bytes.TrimSpace(val)) == "null" {
			if f.required {
				fe.Add(f.name, "required")
			}
			continue
		}
		if err := json.Unmarshal(val, reflect.New(f.typ).Interface()); err != nil {
			fe.Add(f.name, "must be %s", jsonType(f.typ))
		}
	}
	var unknown []string
	for name := range fields {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		fe.Add(name, "unknown argument")
	}
	if len(fe) > 0 {
		return v, fe.Err()
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, approval.Errorf(approval.CodeInvalidInput, "arguments are not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return v, approval.Errorf(approval.CodeInvalidInput, "arguments have data after the JSON object")
	}
	return v, nil
}

type jsonField struct {
	name     string
	typ      reflect.Type
	required bool
}

// jsonFields lists a struct's JSON fields; those without omitempty or
// omitzero are required (as in the inferred schema).
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		optional := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		out = append(out, jsonField{name: name, typ: f.Type, required: !optional})
	}
	return out
}

// jsonType names the JSON type a Go type decodes from.
func jsonType(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "of another type"
}
