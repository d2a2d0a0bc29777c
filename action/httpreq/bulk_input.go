package httpreq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/countersign/countersign/approval"
)

// A bulk http.request (SPEC §10) is up to MaxBulkItems writes to one
// target, approved as one operation. Each item is checked exactly as a
// single request would be (path normalization, allow-list, query
// allow-list, body rules); the items are numbered from 1, as in their
// Idempotency-Key "op_…:N", while field errors name them by their place in
// the list ("items[56].path" is item 57).

// MaxBulkItems is the most items one bulk request may hold.
const MaxBulkItems = 100

// bulkBodyFactor bounds the bodies of a bulk together: at most this many
// times the target's max_body_bytes.
const bulkBodyFactor = 4

// parseItems decodes and normalizes the items of a bulk request.
func parseItems(raw json.RawMessage) ([]*Request, error) {
	if raw[0] != '[' {
		return nil, invalid("bulk_items", "items", "must be a list of {method, path, query?, body?}")
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("bulk_items", "items", "must be a list of {method, path, query?, body?}")
	}
	switch {
	case len(list) == 0:
		return nil, invalid("bulk_items", "items", "must hold at least one request")
	case len(list) > MaxBulkItems:
		e := invalid("max_items", "items", "holds %d requests; a bulk holds at most %d (one target): split it", len(list), MaxBulkItems)
		e.Details["limit"] = MaxBulkItems
		return nil, e
	}
	out := make([]*Request, len(list))
	for i, it := range list {
		r, err := parseItem(it)
		if err != nil {
			return nil, atItem(err, i)
		}
		out[i] = r
	}
	return out, nil
}

// parseItem decodes one item: a request without a target.
func parseItem(raw json.RawMessage) (*Request, error) {
	var in rawRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, decodeError(err, "fields of an item: method, path, query, body",
			"must be a JSON object {method, path, query?, body?}")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, approval.FieldErrors{{Field: "input", Reason: "has data after the JSON object"}}.Err()
	}
	switch {
	case in.Target != "":
		return nil, invalid("bulk_item_target", "target", "an item has no target: the bulk names its one target once")
	case len(bytes.TrimSpace(in.Items)) > 0 && string(bytes.TrimSpace(in.Items)) != "null":
		return nil, invalid("bulk_items", "items", "an item cannot hold items")
	}
	return normalize(in)
}

// atItem rewrites an item's coded error to name the item: the message
// starts with "item N: ", details.item is N, and every field in
// details.fields is put under "items[i].".
func atItem(err error, i int) error {
	var e *approval.Error
	if !errors.As(err, &e) {
		return err
	}
	out := &approval.Error{Code: e.Code, Message: fmt.Sprintf("item %d: %s", i+1, e.Message), Details: map[string]any{}}
	for k, v := range e.Details {
		out.Details[k] = v
	}
	out.Details["item"] = i + 1
	if fs, ok := e.Details["fields"].([]approval.FieldError); ok {
		named := make([]approval.FieldError, len(fs))
		for j, f := range fs {
			field := f.Field
			if field == "input" {
				field = ""
			}
			named[j] = approval.FieldError{Field: strings.TrimSuffix(fmt.Sprintf("items[%d].%s", i, field), "."), Reason: f.Reason}
		}
		out.Details["fields"] = named
	}
	return out
}

var itemField = regexp.MustCompile(`^items\[([0-9]+)\]`)

// depthAtItem names the item of a max_depth error inside items.
func depthAtItem(err error) error {
	var e *approval.Error
	if !errors.As(err, &e) {
		return err
	}
	fs, _ := e.Details["fields"].([]approval.FieldError)
	if len(fs) == 0 {
		return err
	}
	m := itemField.FindStringSubmatch(fs[0].Field)
	if m == nil {
		return err
	}
	i, _ := strconv.Atoi(m[1])
	e.Message = fmt.Sprintf("item %d: %s", i+1, e.Message)
	e.Details["item"] = i + 1
	return e
}

// checkItems applies the target's rules to every item of a bulk: those of
// a single request (checkOne), then the bulk's own: the bodies together
// within bulkBodyFactor × max_body_bytes, and no resource written twice
// (each state-bound item binds its own resource; a second write to it
// would be refused by its own If-Match).
func (t *target) checkItems(r *Request) error {
	total := 0
	seen := map[string]int{}
	for i, it := range r.Items {
		if err := t.checkOne(it); err != nil {
			return atItem(err, i)
		}
		total += len(it.Body)
		if limit := bulkBodyFactor * t.maxBody; total > limit {
			e := approval.PolicyDenied("max_bulk_body_bytes",
				"item %d: the items' bodies add up to more than %d bytes (%d × target %s's max_body_bytes) by this item; split the bulk",
				i+1, limit, bulkBodyFactor, t.Name)
			e.Details["limit"], e.Details["item"] = limit, i+1
			return e
		}
		if !t.bound(it.Method) {
			continue
		}
		if first, dup := seen[it.Path]; dup {
			e := invalid("duplicate_resource", "path", "item %d writes %s too: a bulk writes each resource once (combine the two into one item)",
				first+1, it.Path)
			return atItem(e, i)
		}
		seen[it.Path] = i
	}
	return nil
}
