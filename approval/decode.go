package approval

import (
	"bytes"
	"encoding/json"
	"strings"
)

// DecodeInput decodes an action's raw input into v strictly: JSON no
// deeper than the limit, and no member v does not name. Errors are
// invalid_input naming the field ("unknown field"), or "input" with shape,
// which says what the input must be.
func DecodeInput(raw json.RawMessage, v any, shape string) error {
	if err := CheckJSONDepth(raw, ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return FieldErrors{{Field: strings.Trim(f, `"`), Reason: "unknown field"}}.Err()
		}
		return FieldErrors{{Field: "input", Reason: shape}}.Err()
	}
	return nil
}
