package approval

import (
	"strconv"

	"github.com/countersign/countersign/internal/jsonx"
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
