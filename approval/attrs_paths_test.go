package approval_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
)

// A value set under a name another pointer holds already makes the name
// opaque, in either order: neither spelling wins.
func TestAttrSetTwoPointersOneName(t *testing.T) {
	for _, order := range [][2][]string{
		{{"body", "customer", "tier"}, {"body", "customer.tier"}},
		{{"body", "customer.tier"}, {"body", "customer", "tier"}},
	} {
		attrs := map[string]string{"target": "billing"}
		s := approval.NewAttrSet(attrs)
		s.Set(order[0], "gold")
		s.Set(order[1], "platinum")
		s.Set(order[0], "gold") // and it stays so
		if v := attrs["body.customer.tier"]; v != approval.AttrOpaque("value that has two names") {
			t.Fatalf("%q: body.customer.tier = %q", order, v)
		}
		c := approval.Condition{Attr: "body.customer.tier", Op: approval.OpEq, Values: []string{"platinum"}}
		if v, _ := c.Eval(attrs); v != approval.Undecidable {
			t.Fatalf("%q: a condition on it is %v, want undecidable (the route is taken)", order, v)
		}
	}
	attrs := map[string]string{"target": "billing"}
	s := approval.NewAttrSet(attrs)
	s.Set([]string{"target"}, "other")
	if attrs["target"] == "other" {
		t.Fatal("a body value replaced an attribute set without a pointer")
	}
	s.Set([]string{"body", "app.example/name"}, "x")
	if attrs["body.app.example/name"] != "x" {
		t.Fatalf("a key with dots and slashes alone: %q", attrs)
	}
}

func TestAttrName(t *testing.T) {
	for in, want := range map[string]string{
		"body.amount":             "body.amount",
		"/body/amount":            "body.amount",
		"/body/app.example~1name": "body.app.example/name",
		"/body/a~0b":              "body.a~b",
		"domains":                 "domains",
	} {
		if got, err := approval.AttrName(in); err != nil || got != want {
			t.Errorf("AttrName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := approval.AttrName("/body/a~2"); err == nil {
		t.Error("a malformed pointer was accepted")
	}
}

// The service refuses, for every action, input with two values of one
// name or a number a double does not hold, naming the value; the action
// never sees it.
func TestPrepareRefusesTwoSpellingsForEveryAction(t *testing.T) {
	h := newHarness(t, opts{})
	for _, tc := range []struct{ input, field, rule string }{
		{`{"n":1,"note":"x","extra":{"a":1},"extra.a":2}`, "extra.a", "ambiguous_name"},
		{`{"n":1,"n":2}`, "n", "ambiguous_name"},
		{`{"n":1,"note":"x","big":9007199254740993}`, "big", "number_precision"},
		{`{"n":1,"note":"x","far":[1e400]}`, "far.0", "number_precision"},
	} {
		_, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: json.RawMessage(tc.input)})
		var e *approval.Error
		if !errors.As(err, &e) || e.Code != approval.CodeInvalidInput || e.Details["rule"] != tc.rule {
			t.Fatalf("%s: %v, want invalid_input (%s)", tc.input, err, tc.rule)
		}
		if fs, _ := e.Details["fields"].([]approval.FieldError); len(fs) != 1 || fs[0].Field != tc.field {
			t.Fatalf("%s: fields %+v, want %s", tc.input, e.Details["fields"], tc.field)
		}
	}
	// Spellings of one value are fine: RFC 8785 writes them alike.
	if _, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect",
		Input: json.RawMessage(`{"n":1,"note":"x","w":1.0,"extra":{"z":-0,"y":1e3},"app.example/name":1}`)}); err != nil {
		t.Fatal(err)
	}
}

// An allowance's match and sum may name attributes as JSON Pointers, and
// two names for one attribute are refused. A sum reads only numbers
// spelled as JSON: "0x1p-30" is not a tiny amount.
func TestAllowanceAttributeNames(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 2)
	_, _, err := h.svc.RequestAllowance(bg, h.agent, json.RawMessage(
		`{"action":"test.effect","match":{"note":["a"],"/note":["b"]},"budget":{"count":1},"ttl":"1h","reason":"r"}`), "")
	var e *approval.Error
	if !errors.As(err, &e) || e.Code != approval.CodeInvalidInput {
		t.Fatalf("two names for one attribute: %v", err)
	}
	h.grant(t, `{"action":"test.effect","match":{"/note":{"in":["0x1p-30","5"]}},"budget":{"sum":{"attr":"/note","max":10}},"ttl":"1h","reason":"r"}`)
	if st := h.send(t, h.prepareNote(t, 1, "0x1p-30").Key).Status; st != approval.StatusPending {
		t.Fatalf("a hexadecimal amount was spent from the sum: %s", st)
	}
	if st := h.send(t, h.prepareNote(t, 1, "5").Key).Status; st == approval.StatusPending {
		t.Fatal("5 of 10, matched by pointer, went to a human")
	}
}

// The refusal quotes agent-chosen names back bounded.
func TestTwoNamesRefusalIsBounded(t *testing.T) {
	long := strings.Repeat("k", 50000)
	err := approval.CheckJSONMembers([]byte(`{"`+long+`":{"x":1},"`+long+`.x":2}`), "input")
	var e *approval.Error
	if !errors.As(err, &e) || e.Details["rule"] != "ambiguous_name" {
		t.Fatalf("%v", err)
	}
	if b, _ := json.Marshal(e); len(b) > 4000 {
		t.Fatalf("the refusal of a %d-byte input is %d bytes", 2*len(long), len(b))
	}
}
