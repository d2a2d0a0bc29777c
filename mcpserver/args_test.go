package mcpserver

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/countersign/countersign/approval"
)

func TestDecodeArgsListsEveryProblem(t *testing.T) {
	_, err := decodeArgs[emailArgs](json.RawMessage(`{"to":"a@example.com","subject":7,"text":null,"from":"x","bcc":[1]}`))
	e, ok := err.(*approval.Error)
	if !ok || e.Code != approval.CodeInvalidInput {
		t.Fatalf("err = %v", err)
	}
	got := map[string]string{}
	for _, f := range e.Details["fields"].([]approval.FieldError) {
		got[f.Field] = f.Reason
	}
	want := map[string]string{
		"to": "must be an array of strings", "subject": "must be a string", "text": "required",
		"bcc": "must be an array of strings", "from": "unknown argument",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	for _, bad := range []string{`[]`, `"x"`, `{"to":["a"],"subject":"s","text":"t"} {}`} {
		if _, err := decodeArgs[emailArgs](json.RawMessage(bad)); approval.ErrorCode(err) != approval.CodeInvalidInput {
			t.Errorf("%s: %v", bad, err)
		}
	}
	in, err := decodeArgs[statusArgs](nil)
	if err == nil || in.WaitSeconds != 0 {
		t.Errorf("no arguments: %v", err)
	}
}

// The schema a model sees and the decoder agree on what is required.
func TestSchemaMatchesDecoder(t *testing.T) {
	check := func(name string, required []string, fields []jsonField) {
		var want []string
		for _, f := range fields {
			if f.required {
				want = append(want, f.name)
			}
		}
		slices.Sort(want)
		got := slices.Clone(required)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: schema requires %v, decoder %v", name, got, want)
		}
	}
	check("emailArgs", inputSchema[emailArgs](nil).Required, jsonFields(typeOf[emailArgs]()))
	check("slackArgs", inputSchema[slackArgs](nil).Required, jsonFields(typeOf[slackArgs]()))
	check("httpArgs", inputSchema[httpArgs](nil).Required, jsonFields(typeOf[httpArgs]()))
	check("statusArgs", inputSchema[statusArgs](nil).Required, jsonFields(typeOf[statusArgs]()))
	check("listArgs", inputSchema[listArgs](nil).Required, jsonFields(typeOf[listArgs]()))
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }
