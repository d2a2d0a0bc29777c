package approval

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/countersign/countersign/approval/jcs"
	"github.com/countersign/countersign/approval/jsonx"
)

// MaxJSONDepth is the deepest nesting accepted in any JSON input (SPEC §3
// guarantee 10).
const MaxJSONDepth = jsonx.MaxDepth

// CheckJSONDepth refuses raw, before anything decodes it, when it nests
// deeper than MaxJSONDepth: invalid_input whose details.fields names the
// value that is too deep, under field (the name of raw itself, "" for a
// whole request). Every adapter and action calls it on what it is sent.
func CheckJSONDepth(raw []byte, field string) error {
	e := jsonx.CheckDepth(raw, MaxJSONDepth)
	if e == nil {
		return nil
	}
	name := joinField(field, e.Path)
	if name == "" {
		name = "input"
	}
	err := FieldErrors{{Field: name, Reason: "nested deeper than " + strconv.Itoa(e.Max) + " levels of arrays and objects"}}.Err().(*Error)
	err.Details["rule"] = "max_depth"
	err.Details["max_depth"] = e.Max
	return err
}

func joinField(prefix, path string) string {
	switch {
	case prefix == "":
		return path
	case path == "":
		return prefix
	case path[0] == '[':
		return prefix + path
	}
	return prefix + "." + path
}

// CheckJSONMembers refuses raw (guarantee 13) when two of its values have
// the same dotted name — a member "a.b" beside a member "b" of "a", at any
// depth, in arrays too, or one name given twice — or when a number in it
// does not keep its value through RFC 8785 (beyond a double's range, or
// more precise than a double holds: 9007199254740993, 1e-400). Either is
// invalid_input whose details.fields names the value (under field, as
// CheckJSONDepth does) and whose details.rule is "ambiguous_name" or
// "number_precision". Run CheckJSONDepth first. The service runs both on
// every action's input before the action reads it (Service.Prepare and
// edits), so no action can route, spend or show one spelling of a value
// while the target reads another.
func CheckJSONMembers(raw []byte, field string) error {
	err := jsonx.CheckMembers(raw)
	var conflict *jsonx.NameConflict
	var num *jsonx.NumberError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &conflict):
		name := joinField(field, cut(conflict.Name))
		conflict.First, conflict.Second = cut(conflict.First), cut(conflict.Second)
		e := FieldErrors{{Field: cmp.Or(name, "input"), Reason: fmt.Sprintf(
			"two values have this name: %s and %s (JSON Pointers); a route, an allowance or an edit would read one "+
				"and the target might read the other, so rename or remove one", conflict.First, conflict.Second)}}.Err().(*Error)
		e.Details["rule"] = "ambiguous_name"
		e.Details["pointers"] = []string{conflict.First, conflict.Second}
		return e
	case errors.As(err, &num):
		name := joinField(field, cut(dotted(num.Pointer)))
		reason := "the number " + num.Number + " is more precise than a double (RFC 8785) holds: it would be hashed, " +
			"shown and routed as another value; send it as a string"
		if errors.Is(num.Err, jcs.ErrNumberRange) {
			reason = "the number " + num.Number + " is beyond the range of a double (RFC 8785); send it as a string"
		}
		e := FieldErrors{{Field: cmp.Or(name, "input"), Reason: reason}}.Err().(*Error)
		e.Details["rule"] = "number_precision"
		return e
	}
	return FieldErrors{{Field: cmp.Or(field, "input"), Reason: "must be JSON"}}.Err()
}

// cut bounds agent-chosen names quoted back in an error.
func cut(s string) string {
	if len(s) <= 200 {
		return s
	}
	i := 200
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// dotted is the dotted name of a JSON Pointer that jsonx wrote.
func dotted(ptr string) string {
	tokens, _ := jsonx.ParsePointer(ptr)
	return jsonx.DottedName(tokens)
}
