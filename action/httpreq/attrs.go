package httpreq

import (
	"github.com/countersign/countersign/approval"
)

// Attrs are the facts routes can match on (approval.Match): "target",
// "method", "path", "query.<name>", and "body" with one attribute for
// every value of a JSON body, nested fields dotted ("body.customer.tier"):
// the dotted name of the value's JSON Pointer into the body, which is one
// value only, since input where two values share one is refused
// (approval.CheckJSONMembers).
// Numbers keep their canonical JSON text ("1000", "12.5"), booleans read
// "true"/"false", null reads "null".
//
// Nothing present is left out, so that no value can dodge a condition by
// its shape (conditions fail closed, see approval.Condition): an object is
// approval.AttrObject (its fields follow), a list is opaque, and so are a
// string longer than 256 bytes or with control characters, and a query
// parameter given several values. A body that is not an object is "body"
// itself (opaque when it is a list).
//
// A bulk request reports its items' attributes together (bulkAttrs).
func (r *Request) Attrs() map[string]string {
	if r.bulk() {
		return bulkAttrs(r)
	}
	attrs := map[string]string{"target": r.Target, "method": r.Method, "path": r.Path}
	for k, vals := range r.Query {
		if len(vals) == 1 {
			attrs["query."+k] = textAttr(vals[0])
		} else {
			attrs["query."+k] = approval.AttrOpaque("list")
		}
	}
	if len(r.Body) == 0 {
		return attrs
	}
	body, err := decodeJSON(r.Body)
	if err != nil {
		attrs["body"] = approval.AttrOpaque("unreadable body")
		return attrs
	}
	valueAttrs(approval.NewAttrSet(attrs), []string{"body"}, body)
	return attrs
}

// valueAttrs reports v at the pointer tokens, and an object's fields below
// it (approval.AttrSet.AddJSON: every value by its own pointer, so a
// member "a.b" beside a member "b" of "a" makes "body.a.b" opaque, not
// whichever came last; such input is refused before it gets here).
func valueAttrs(set *approval.AttrSet, tokens []string, v any) { set.AddJSON(tokens, v) }

// textAttr is s, or opaque when routes should not read it as text.
func textAttr(s string) string { return approval.TextAttr(s) }

// fieldPathBytes adds up the length of the dotted path of every value in v
// (as Attrs, the diff and the state binding spell them), stopping once past
// limit: deep objects with long keys repeat each key in every path below.
func fieldPathBytes(v any, prefix, limit int) int {
	obj, ok := v.(map[string]any)
	if !ok {
		return 0
	}
	total := 0
	for k, sub := range obj {
		n := prefix + 1 + len(k)
		total += n
		if total > limit {
			return total
		}
		total += fieldPathBytes(sub, n, limit-total)
		if total > limit {
			return total
		}
	}
	return total
}

// maxFieldPathBytes is how much the dotted paths of a body of n bytes may
// add up to.
func maxFieldPathBytes(n int) int { return 2*n + 16<<10 }
