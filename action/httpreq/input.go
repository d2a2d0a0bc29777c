package httpreq

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/countersign/countersign/approval"
)

// Request is the normalized input of http.request: what is stored, hashed,
// shown and executed. Headers are not part of it: they come from the
// target's configuration, and the agent never sees or sets them.
type Request struct {
	Target string              `json:"target"`
	Method string              `json:"method"`
	Path   string              `json:"path"`
	Query  map[string][]string `json:"query,omitempty"`
	Body   json.RawMessage     `json:"body,omitempty"`

	segs []string // decoded path segments
}

// rawRequest is the input as an agent writes it.
type rawRequest struct {
	Target string                     `json:"target"`
	Method string                     `json:"method"`
	Path   string                     `json:"path"`
	Query  map[string]json.RawMessage `json:"query"`
	Body   json.RawMessage            `json:"body"`
}

var (
	methodToken = regexp.MustCompile(`^[A-Za-z]{1,16}$`)
	queryName   = regexp.MustCompile(`^[A-Za-z0-9_.\-\[\]]{1,128}$`)
)

const (
	maxQueryParams = 50
	maxQueryValue  = 1024
)

// invalid is an invalid_input error naming a field, why, and the rule.
func invalid(rule, field, format string, args ...any) *approval.Error {
	e := approval.FieldErrors{}
	e.Add(field, format, args...)
	err := e.Err().(*approval.Error)
	err.Details["rule"] = rule
	return err
}

// parseRequest decodes and normalizes an agent's input, without looking at
// any target: the method is upper-cased, the path normalized (or refused),
// the query made a map of lists, the body canonical JSON.
func parseRequest(raw json.RawMessage) (*Request, error) {
	var in rawRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var ute *json.UnmarshalTypeError
		switch {
		case errors.As(err, &ute) && ute.Field != "":
			return nil, approval.FieldErrors{{Field: ute.Field, Reason: "must be " + jsonType(ute.Type.String())}}.Err()
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			reason := "unknown field (fields: target, method, path, query, body)"
			if strings.EqualFold(f, "headers") || strings.EqualFold(f, "url") {
				reason = "not accepted: the URL and headers come from the target's configuration"
			}
			return nil, approval.FieldErrors{{Field: f, Reason: reason}}.Err()
		}
		return nil, approval.FieldErrors{{Field: "input", Reason: "must be a JSON object {target, method, path, query?, body?}"}}.Err()
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, approval.FieldErrors{{Field: "input", Reason: "has data after the JSON object"}}.Err()
	}
	var fe approval.FieldErrors
	if in.Target == "" {
		fe.Add("target", "required")
	}
	switch {
	case in.Method == "":
		fe.Add("method", "required")
	case !methodToken.MatchString(in.Method):
		fe.Add("method", "must be an HTTP method such as PATCH")
	}
	if in.Path == "" {
		fe.Add("path", "required")
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	r := &Request{Target: in.Target, Method: strings.ToUpper(in.Method)}
	p, segs, perr := normalizePath(in.Path)
	if perr != nil {
		return nil, invalid(perr.rule, "path", "%s", perr.reason)
	}
	r.Path, r.segs = p, segs

	if len(in.Query) > maxQueryParams {
		return nil, invalid("query_too_large", "query", "at most %d parameters", maxQueryParams)
	}
	for _, k := range sortedKeys(in.Query) {
		if !queryName.MatchString(k) {
			return nil, invalid("query_name", "query."+k, "parameter names are letters, digits and _ . - [ ]")
		}
		vals, err := queryValues(in.Query[k])
		if err != nil {
			return nil, invalid("query_value", "query."+k, "%s", err.Error())
		}
		if r.Query == nil {
			r.Query = map[string][]string{}
		}
		r.Query[k] = vals
	}

	if len(in.Body) > 0 && string(bytes.TrimSpace(in.Body)) != "null" {
		c, err := approval.Canonical(in.Body)
		if err != nil {
			return nil, approval.FieldErrors{{Field: "body", Reason: "must be JSON"}}.Err()
		}
		r.Body = c
	}
	return r, nil
}

// queryValues accepts a string, number or boolean, or a list of them.
func queryValues(raw json.RawMessage) ([]string, error) {
	one := func(v any) (string, error) {
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case json.Number:
			s = x.String()
		case bool:
			if x {
				s = "true"
			} else {
				s = "false"
			}
		default:
			return "", errors.New("must be a string, number or boolean, or a list of them")
		}
		if len(s) > maxQueryValue {
			return "", errors.New("value longer than 1024 characters")
		}
		for _, r := range s {
			if r < 0x20 || r == 0x7f {
				return "", errors.New("contains a control character")
			}
		}
		return s, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("must be JSON")
	}
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	if len(list) == 0 || len(list) > 20 {
		return nil, errors.New("a list must have 1 to 20 values")
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, err := one(x)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func jsonType(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	}
	return goType
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// decodeStored reads a normalized request back from an operation's input.
func decodeStored(raw json.RawMessage) (*Request, error) {
	var r Request
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	p, segs, perr := normalizePath(r.Path)
	if perr != nil || p != r.Path {
		return nil, errors.New("stored path is not normalized")
	}
	r.segs = segs
	return &r, nil
}

// Attribute limits: routes match on small facts, not on whole documents.
const (
	maxAttrs     = 256
	maxAttrValue = 256
)

// Attrs are the facts routes can match on (approval.Match): "target",
// "method", "path", "query.<name>" (values joined with ","), and
// "body.<field>" for every scalar in a JSON object body, nested fields
// dotted ("body.customer.tier"). Numbers keep their canonical JSON text
// ("1000", "12.5"), booleans read "true"/"false", null reads "null".
// Strings longer than 256 characters, arrays and objects are left out.
func (r *Request) Attrs() map[string]string {
	attrs := map[string]string{"target": r.Target, "method": r.Method, "path": r.Path}
	for _, k := range sortedKeys(r.Query) {
		attrs["query."+k] = strings.Join(r.Query[k], ",")
	}
	if len(r.Body) == 0 {
		return attrs
	}
	body, err := decodeJSON(r.Body)
	if err != nil {
		return attrs
	}
	obj, ok := body.(map[string]any)
	if !ok {
		return attrs
	}
	for _, l := range leaves(obj, nil) {
		if len(attrs) >= maxAttrs {
			break
		}
		name := "body." + l.path.String()
		switch v := l.value.(type) {
		case string:
			if len(v) <= maxAttrValue {
				attrs[name] = v
			}
		case json.Number:
			attrs[name] = v.String()
		case bool:
			attrs[name] = map[bool]string{true: "true", false: "false"}[v]
		case nil:
			attrs[name] = "null"
		}
	}
	return attrs
}

// SampleAttrs normalizes an http.request input without any network or
// target and returns the attributes its routes would see, so check-config
// can explain a sample operation.
func SampleAttrs(input json.RawMessage) (map[string]string, error) {
	r, err := parseRequest(input)
	if err != nil {
		return nil, err
	}
	return r.Attrs(), nil
}

// writeMethods are the methods http.request may send.
var writeMethods = []string{"POST", "PUT", "PATCH", "DELETE"}

func isWrite(m string) bool { return slices.Contains(writeMethods, m) }
