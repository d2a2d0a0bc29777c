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
//
// A bulk request (SPEC §10) names its target once and holds its writes in
// Items, each a Request without a target; Method, Path, Query and Body are
// then empty. A single request never has Items, and always has a target,
// a method and a path, so the omitempty tags leave its canonical form (and
// payload hash) as it always was.
type Request struct {
	Target string              `json:"target,omitempty"`
	Method string              `json:"method,omitempty"`
	Path   string              `json:"path,omitempty"`
	Query  map[string][]string `json:"query,omitempty"`
	Body   json.RawMessage     `json:"body,omitempty"`
	Items  []*Request          `json:"items,omitempty"`

	segs []string // decoded path segments
}

// bulk reports whether r is a bulk request.
func (r *Request) bulk() bool { return len(r.Items) > 0 }

// rawRequest is the input as an agent writes it.
type rawRequest struct {
	Target string                     `json:"target"`
	Method string                     `json:"method"`
	Path   string                     `json:"path"`
	Query  map[string]json.RawMessage `json:"query"`
	Body   json.RawMessage            `json:"body"`
	Items  json.RawMessage            `json:"items"`
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
// the query made a map of lists, the body canonical JSON. An input with
// items is a bulk request (parseItems).
func parseRequest(raw json.RawMessage) (*Request, error) {
	var in rawRequest
	if err := approval.CheckJSONDepth(raw, ""); err != nil {
		return nil, depthAtItem(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, decodeError(err, "fields: target, method, path, query, body, or target and items",
			"must be a JSON object {target, method, path, query?, body?} or {target, items}")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, approval.FieldErrors{{Field: "input", Reason: "has data after the JSON object"}}.Err()
	}
	if in.Target == "" {
		return nil, approval.FieldErrors{{Field: "target", Reason: "required"}}.Err()
	}
	if items := bytes.TrimSpace(in.Items); len(items) > 0 && string(items) != "null" {
		if in.Method != "" || in.Path != "" || in.Query != nil || len(bytes.TrimSpace(in.Body)) > 0 {
			return nil, invalid("bulk_exclusive", "items",
				"cannot be combined with method, path, query or body: a bulk request names them in each item")
		}
		list, err := parseItems(items)
		if err != nil {
			return nil, err
		}
		return &Request{Target: in.Target, Items: list}, nil
	}
	r, err := normalize(in)
	if err != nil {
		return nil, err
	}
	r.Target = in.Target
	return r, nil
}

// decodeError turns a decoding failure into invalid_input naming the field.
func decodeError(err error, fields, shape string) error {
	var ute *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ute) && ute.Field != "":
		return approval.FieldErrors{{Field: ute.Field, Reason: "must be " + jsonType(ute.Type.String())}}.Err()
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		reason := "unknown field (" + fields + ")"
		if strings.EqualFold(f, "headers") || strings.EqualFold(f, "url") {
			reason = "not accepted: the URL and headers come from the target's configuration"
		}
		return approval.FieldErrors{{Field: f, Reason: reason}}.Err()
	}
	return approval.FieldErrors{{Field: "input", Reason: shape}}.Err()
}

// normalize checks and normalizes one write: method, path, query, body.
func normalize(in rawRequest) (*Request, error) {
	var fe approval.FieldErrors
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
	r := &Request{Method: strings.ToUpper(in.Method)}
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
	if !r.bulk() {
		if err := r.restoreSegs(); err != nil {
			return nil, err
		}
		return &r, nil
	}
	for _, it := range r.Items {
		if it == nil || it.bulk() || it.Target != "" {
			return nil, errors.New("stored item is malformed")
		}
		if err := it.restoreSegs(); err != nil {
			return nil, err
		}
	}
	return &r, nil
}

// restoreSegs decodes the stored path's segments, checking it is normalized.
func (r *Request) restoreSegs() error {
	p, segs, perr := normalizePath(r.Path)
	if perr != nil || p != r.Path {
		return errors.New("stored path is not normalized")
	}
	r.segs = segs
	return nil
}

// SampleAttrs normalizes an http.request input without any network or
// target and returns the attributes its routes would see, so check-config
// can explain a sample operation.
func SampleAttrs(input json.RawMessage) (map[string]string, error) {
	if err := approval.CheckJSONDepth(input, ""); err != nil {
		return nil, err
	}
	if err := approval.CheckJSONMembers(input, ""); err != nil { // as the service refuses it
		return nil, err
	}
	r, err := parseRequest(input)
	if err != nil {
		return nil, err
	}
	return r.Attrs(), nil
}

// writeMethods are the methods http.request may send.
var writeMethods = []string{"POST", "PUT", "PATCH", "DELETE"}

func isWrite(m string) bool { return slices.Contains(writeMethods, m) }
