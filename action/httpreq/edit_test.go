package httpreq

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
)

func editOp(t *testing.T, input string) *approval.Operation {
	t.Helper()
	r, err := decodeStored(json.RawMessage(input))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(r)
	return &approval.Operation{Action: Name, Input: raw}
}

// Only body values are editable; strings as text, others as JSON; where
// the write goes never.
func TestEditableBodyFields(t *testing.T) {
	a := &Action{}
	op := editOp(t, `{"target":"billing","method":"POST","path":"/invoices","body":{"amount":250,"memo":"Nov","to":{"name":"Ada"},"lines":[1,2]}}`)
	var names []string
	for _, f := range a.Editable(op) {
		names = append(names, f.Name+"="+f.Value)
	}
	if got := strings.Join(names, " "); got != "body.amount=250 body.lines=[1,2] body.memo=Nov body.to.name=Ada" {
		t.Fatalf("editable: %s", got)
	}
	raw, err := a.EditInput(op, map[string]string{"body.amount": "2500", "body.memo": "November \"final\""})
	if err != nil {
		t.Fatal(err)
	}
	var got Request
	_ = json.Unmarshal(raw, &got)
	if got.Path != "/invoices" || got.Target != "billing" || string(got.Body) != `{"amount":2500,"lines":[1,2],"memo":"November \"final\"","to":{"name":"Ada"}}` {
		t.Fatalf("edited: %s", raw)
	}
	for _, bad := range []map[string]string{
		{"path": "/invoices/9"},
		{"target": "calendar"},
		{"body.new_field": "1"},
		{"body.amount": "2,500"},
	} {
		_, err := a.EditInput(op, bad)
		var e *approval.Error
		if !errors.As(err, &e) || e.Code != approval.CodeInvalidInput {
			t.Errorf("%v: %v", bad, err)
		}
	}
	// A body that is not an object is one JSON field.
	op = editOp(t, `{"target":"billing","method":"POST","path":"/invoices","body":[1,2]}`)
	if fs := a.Editable(op); len(fs) != 1 || fs[0].Name != "body" || fs[0].Value != "[1,2]" {
		t.Fatalf("array body: %+v", fs)
	}
	// A body with more leaves than a form can hold offers the first ones.
	var b strings.Builder
	b.WriteString(`{"target":"billing","method":"POST","path":"/invoices","body":{`)
	for i := range 500 {
		fmt.Fprintf(&b, `%s"f%03d":%d`, map[bool]string{true: ",", false: ""}[i > 0], i, i)
	}
	b.WriteString(`}}`)
	if n := len(a.Editable(editOp(t, b.String()))); n != maxEditable {
		t.Fatalf("%d fields offered", n)
	}
}

// A member whose name holds dots is edited where it is: the field
// "body.app.example/name" is that member, not app → example/name (which
// would add a second value with the same name beside it).
func TestEditKeyWithDots(t *testing.T) {
	a := &Action{}
	for _, bulk := range []bool{false, true} {
		input := `{"target":"billing","method":"POST","path":"/invoices","body":{"app.example/name":"old","app":{"x":1}}}`
		name := "body.app.example/name"
		if bulk {
			input = `{"target":"billing","items":[{"method":"POST","path":"/invoices","body":{"app.example/name":"old","app":{"x":1}}}]}`
			name = "items.1." + name
		}
		op := editOp(t, input)
		raw, err := a.EditInput(op, map[string]string{name: "new"})
		if err != nil {
			t.Fatal(err)
		}
		var got Request
		_ = json.Unmarshal(raw, &got)
		body := got.Body
		if bulk {
			body = got.Items[0].Body
		}
		if string(body) != `{"app":{"x":1},"app.example/name":"new"}` {
			t.Fatalf("bulk %v: edited body %s", bulk, body)
		}
	}
}
