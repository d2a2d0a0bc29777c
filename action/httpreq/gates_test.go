package httpreq_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
)

// TestQueryParametersMustBeListed: the example of issue 8, a PATCH with
// query {"_method": "DELETE"} on a rule listing no query parameters, is
// refused before anything reaches the target; a listed name passes.
func TestQueryParametersMustBeListed(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f)) // PATCH lists [notify]; DELETE lists none
	for _, c := range []struct {
		input   string
		refused []string
	}{
		{`{"target":"calendar","method":"PATCH","path":"/events/42","query":{"_method":"DELETE"},"body":{"title":"x"}}`, []string{"_method"}},
		{`{"target":"calendar","method":"PATCH","path":"/events/42","query":{"notify":"none","force":true},"body":{"title":"x"}}`, []string{"force"}},
		{`{"target":"calendar","method":"DELETE","path":"/events/42","query":{"notify":"none"}}`, []string{"notify"}},
		{`{"target":"calendar","method":"PATCH","path":"/events/42","query":{"Notify":"none"},"body":{"title":"x"}}`, []string{"Notify"}}, // exact names
	} {
		before := len(f.requests())
		_, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent, Input: json.RawMessage(c.input)})
		e := codedErr(t, err)
		if e.Code != approval.CodePolicyDenied || e.Details["rule"] != "query_not_allowed" {
			t.Fatalf("%s: %s %v", c.input, e.Code, e.Details)
		}
		if got := fmt.Sprint(e.Details["not_allowed"]); got != fmt.Sprint(c.refused) {
			t.Errorf("%s: not_allowed %s, want %v", c.input, got, c.refused)
		}
		if n := len(f.requests()); n != before {
			t.Errorf("%s: %d request(s) reached the target", c.input, n-before)
		}
	}
	p := prepare(t, a, `{"target":"calendar","method":"PATCH","path":"/events/42","query":{"notify":"none"},"body":{"title":"x"}}`)
	if got := p.Input.(*httpreq.Request).Query["notify"]; len(got) != 1 || got[0] != "none" {
		t.Fatalf("listed parameter: %v", got)
	}
	if _, err := httpreq.New([]httpreq.Target{{Name: "x", BaseURL: "https://x.example", Allow: []httpreq.Rule{{Method: "POST", Path: "/", Query: []string{"a b"}}}}}); err == nil {
		t.Fatal("a rule listing a malformed parameter name was accepted")
	}
}

// TestAttrsCannotDodgeConditions: whatever shape the agent gives a value,
// the route that guards it still sees it, present, and either readable or
// opaque (which takes the route: approval.Condition).
func TestAttrsCannotDodgeConditions(t *testing.T) {
	big := approval.Condition{Attr: "body.amount", Op: approval.OpGt, Number: 1000}
	for _, body := range []string{
		`{"amount":5000}`, `{"amount":"5,000"}`, `{"amount":[5000]}`, `{"amount":{"value":5000}}`,
		`{"amount":"` + strings.Repeat("5", 300) + `"}`, `{"amount":"5000\u0000"}`, `[{"amount":5000}]`,
		`{"amount":null}`, `{"amount":true}`, // (1e400 is refused: canonical JSON has no such number)
		// More fields than any fixed cap, sorted before the one that matters.
		`{` + manyFields(400) + `"amount":5000}`,
	} {
		attrs, err := httpreq.SampleAttrs(json.RawMessage(`{"target":"billing","method":"POST","path":"/refunds","body":` + body + `}`))
		if err != nil {
			t.Fatalf("%.60s: %v", body, err)
		}
		if v, why := big.Eval(attrs); v == approval.Fails {
			t.Errorf("%.60s: body.amount > 1000 fails (%s): the stricter route would be passed over", body, why)
		}
	}
	attrs, _ := httpreq.SampleAttrs(json.RawMessage(`{"target":"billing","method":"POST","path":"/refunds","body":{"amount":50}}`))
	if v, _ := big.Eval(attrs); v != approval.Fails {
		t.Fatal("a small amount does not read as small")
	}
	attrs, _ = httpreq.SampleAttrs(json.RawMessage(`{"target":"billing","method":"POST","path":"/refunds","query":{"amount":["5","000"]}}`))
	if v, _ := (approval.Condition{Attr: "query.amount", Op: approval.OpLt, Number: 10}).Eval(attrs); v != approval.Undecidable {
		t.Fatal("a query parameter given twice reads as one value")
	}
}

func manyFields(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `"a%04d":1,`, i)
	}
	return b.String()
}

// TestDeepInputRefusedBeforeDecoding: any JSON nested deeper than 32
// levels is invalid_input naming the field, and nothing reaches the target.
func TestDeepInputRefusedBeforeDecoding(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	for _, depth := range []int{33, 3000, 9000} {
		body := `{"title":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
		_, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent,
			Input: json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/42","body":` + body + `}`)})
		e := codedErr(t, err)
		fields, _ := e.Details["fields"].([]approval.FieldError)
		if e.Code != approval.CodeInvalidInput || e.Details["rule"] != "max_depth" || len(fields) != 1 ||
			!strings.HasPrefix(fields[0].Field, "body.title[0][0]") {
			t.Fatalf("depth %d: %s %v", depth, e.Code, e.Details)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d request(s) reached the target", n)
	}
	// 32 levels in all (input, body, 30 more) is still accepted.
	body := `{"title":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}`
	prepare(t, a, `{"target":"calendar","method":"PATCH","path":"/events/42","body":`+body+`}`)

	// A resource that nests too deeply cannot be bound either.
	deep := map[string]any{"title": "x"}
	cur := deep
	for range 40 {
		next := map[string]any{}
		cur["n"] = next
		cur = next
	}
	f.put(eventPath, deep)
	_, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent,
		Input: json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"y"}}`)})
	if e := codedErr(t, err); e.Details["rule"] != "state_too_deep" {
		t.Fatalf("deep resource: %s %v", e.Code, e.Details)
	}
}

// TestFieldPathsBounded: a body whose dotted field paths would add up to
// far more than the body (long keys repeated in every path below them) is
// refused; an ordinary nested body is not.
func TestFieldPathsBounded(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	long := strings.Repeat("k", 2000)
	body := `{"` + long + `":{"` + long + `":{"` + long + `":{` + manyFields(2000) + `"z":1}}}}`
	_, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent,
		Input: json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/42","body":` + body + `}`)})
	if e := codedErr(t, err); e.Code != approval.CodeInvalidInput || e.Details["rule"] != "max_field_paths" {
		t.Fatalf("%s %v", e.Code, e.Details)
	}
	prepare(t, a, `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"time":{"zone":"CET","start":{"date":"2025-01-01","hour":9}}}}`)
}
