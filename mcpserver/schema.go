package mcpserver

import (
	"encoding/json"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool schemas are written for the strictest clients (the MCP Inspector's
// --strict portability rules, the single-type dialects some model
// providers map tool schemas onto): every schema has a single type or
// says its alternatives with anyOf, and none is an empty "any value".

// anyJSON is a schema for any JSON value, spelled out type by type.
func anyJSON(description string) *jsonschema.Schema {
	s := &jsonschema.Schema{Description: description}
	for _, t := range []string{"object", "array", "string", "number", "boolean", "null"} {
		s.AnyOf = append(s.AnyOf, &jsonschema.Schema{Type: t})
	}
	return s
}

// schemaOptions describe json.RawMessage (input, result, body, diff
// values) as any JSON value rather than as bytes.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): anyJSON("any JSON value"),
}}

// portable rewrites s in place: a type union such as ["null","array"]
// becomes anyOf branches of one type each, the non-null branch keeping
// the type's own keywords; schemas nested anywhere are rewritten too.
func portable(s *jsonschema.Schema) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	for _, p := range s.Properties {
		portable(p)
	}
	for _, sub := range [](*jsonschema.Schema){s.Items, s.AdditionalProperties, s.Not} {
		portable(sub)
	}
	for _, l := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf, s.AllOf, s.PrefixItems} {
		for _, sub := range l {
			portable(sub)
		}
	}
	if len(s.Types) < 2 {
		if len(s.Types) == 1 {
			s.Type, s.Types = s.Types[0], nil
		}
		return s
	}
	types := s.Types
	body := *s // the keywords of the non-null type
	body.Types, body.Description, body.Title, body.AnyOf = nil, "", "", nil
	*s = jsonschema.Schema{Title: s.Title, Description: s.Description, AnyOf: s.AnyOf}
	for _, t := range types {
		if t == "null" {
			s.AnyOf = append(s.AnyOf, &jsonschema.Schema{Type: "null"})
			continue
		}
		b := body
		b.Type = t
		s.AnyOf = append(s.AnyOf, &b)
	}
	return s
}
