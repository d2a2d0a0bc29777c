package approval_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
)

func TestConditionHolds(t *testing.T) {
	attrs := map[string]string{"target": "billing", "method": "PATCH", "body.amount": "1500.5", "body.currency": "EUR",
		"body.note": "not a number", "outside_domains": "0", "path": "/invoices/7"}
	for _, tc := range []struct {
		c    approval.Condition
		want bool
	}{
		{approval.Condition{Attr: "body.amount", Op: approval.OpGt, Number: 1000}, true},
		{approval.Condition{Attr: "body.amount", Op: approval.OpGt, Number: 1500.5}, false},
		{approval.Condition{Attr: "body.amount", Op: approval.OpGte, Number: 1500.5}, true},
		{approval.Condition{Attr: "body.amount", Op: approval.OpLt, Number: 1000}, false},
		{approval.Condition{Attr: "body.amount", Op: approval.OpLte, Number: 1500.5}, true},
		{approval.Condition{Attr: "body.missing", Op: approval.OpGt, Number: 0}, false},    // absent never compares
		{approval.Condition{Attr: "body.note", Op: approval.OpGt, Number: 0}, true},        // not a number: undecidable, taken
		{approval.Condition{Attr: "outside_domains", Op: approval.OpGt, Number: 0}, false}, // email: all inside
		{approval.Condition{Attr: "body.currency", Op: approval.OpEq, Values: []string{"EUR"}}, true},
		{approval.Condition{Attr: "body.currency", Op: approval.OpEq, Values: []string{"eur"}}, false}, // exact
		{approval.Condition{Attr: "body.currency", Op: approval.OpNe, Values: []string{"USD"}}, true},
		{approval.Condition{Attr: "body.missing", Op: approval.OpNe, Values: []string{"USD"}}, true}, // absent is "not USD"
		{approval.Condition{Attr: "method", Op: approval.OpIn, Values: []string{"PUT", "PATCH"}}, true},
		{approval.Condition{Attr: "method", Op: approval.OpIn, Values: []string{"DELETE"}}, false},
		{approval.Condition{Attr: "body.missing", Op: approval.OpIn, Values: []string{""}}, false},
		{approval.Condition{Attr: "method", Op: approval.OpNotIn, Values: []string{"DELETE"}}, true},
		{approval.Condition{Attr: "body.missing", Op: approval.OpNotIn, Values: []string{"x"}}, true},
		{approval.Condition{Attr: "body.amount", Op: approval.OpPresent}, true},
		{approval.Condition{Attr: "body.missing", Op: approval.OpPresent}, false},
		{approval.Condition{Attr: "body.missing", Op: approval.OpAbsent}, true},
		{approval.Condition{Attr: "path", Op: approval.OpMatches, Values: []string{"/invoices/*"}}, true},
		{approval.Condition{Attr: "path", Op: approval.OpMatches, Values: []string{"/events/*"}}, false},
		{approval.Condition{Attr: "path", Op: approval.OpMatches, Values: []string{"/invoices"}}, false}, // whole value
	} {
		if got := tc.c.Holds(attrs); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.c, got, tc.want)
		}
	}
}

// TestConditionsFailClosed: a present attribute that a condition cannot
// compare (a number spelled otherwise, a list, an object, anything inside
// a list) takes the route; absent attributes keep their meaning.
func TestConditionsFailClosed(t *testing.T) {
	gt := approval.Condition{Attr: "body.amount", Op: approval.OpGt, Number: 1000}
	lte := approval.Condition{Attr: "body.amount", Op: approval.OpLte, Number: 1000}
	eq := approval.Condition{Attr: "body.currency", Op: approval.OpEq, Values: []string{"USD"}}
	in := approval.Condition{Attr: "body.currency", Op: approval.OpIn, Values: []string{"EUR"}}
	for _, tc := range []struct {
		name  string
		c     approval.Condition
		attrs map[string]string
		want  approval.Verdict
	}{
		{"number", gt, map[string]string{"body.amount": "5000"}, approval.Holds},
		{"small number", gt, map[string]string{"body.amount": "50"}, approval.Fails},
		{"exponent", gt, map[string]string{"body.amount": "5e3"}, approval.Holds},
		{"absent", gt, map[string]string{}, approval.Fails},
		{"thousands separator", gt, map[string]string{"body.amount": "5,000"}, approval.Undecidable},
		{"thousands separator, lte", lte, map[string]string{"body.amount": "5,000"}, approval.Undecidable},
		{"hex", gt, map[string]string{"body.amount": "0x1388"}, approval.Undecidable},
		{"underscores", gt, map[string]string{"body.amount": "5_000"}, approval.Undecidable},
		{"leading space", gt, map[string]string{"body.amount": " 5000"}, approval.Undecidable},
		{"infinity", gt, map[string]string{"body.amount": "Inf"}, approval.Undecidable},
		{"out of range", gt, map[string]string{"body.amount": "1e400"}, approval.Undecidable},
		{"empty", gt, map[string]string{"body.amount": ""}, approval.Undecidable},
		{"null", gt, map[string]string{"body.amount": "null"}, approval.Undecidable},
		{"boolean", gt, map[string]string{"body.amount": "true"}, approval.Undecidable},
		{"list", gt, map[string]string{"body.amount": approval.AttrOpaque("list")}, approval.Undecidable},
		{"object", gt, map[string]string{"body.amount": approval.AttrObject, "body.amount.value": "5000"}, approval.Undecidable},
		{"inside a list", gt, map[string]string{"body": approval.AttrOpaque("list")}, approval.Undecidable},
		{"inside a list, deeper", gt, map[string]string{"body.lines": approval.AttrOpaque("list")},
			approval.Fails}, // body.amount is not inside body.lines
		{"inside an object is read", approval.Condition{Attr: "body.amount.value", Op: approval.OpGt, Number: 1000},
			map[string]string{"body.amount": approval.AttrObject, "body.amount.value": "50"}, approval.Fails},
		{"absent field of an object", approval.Condition{Attr: "body.customer.tier", Op: approval.OpEq, Values: []string{"gold"}},
			map[string]string{"body.customer": approval.AttrObject}, approval.Fails},
		{"eq on a list", eq, map[string]string{"body.currency": approval.AttrOpaque("list")}, approval.Undecidable},
		{"in on a long string", in, map[string]string{"body.currency": approval.AttrOpaque("long string")}, approval.Undecidable},
		{"eq text", eq, map[string]string{"body.currency": "USD"}, approval.Holds},
		{"present on a list", approval.Condition{Attr: "body.amount", Op: approval.OpPresent},
			map[string]string{"body.amount": approval.AttrOpaque("list")}, approval.Holds},
		{"absent inside a list", approval.Condition{Attr: "body.amount", Op: approval.OpAbsent},
			map[string]string{"body": approval.AttrOpaque("list")}, approval.Fails},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := tc.c.Eval(tc.attrs)
			if got != tc.want {
				t.Fatalf("%s on %v = %v (%s), want %v", tc.c, tc.attrs, got, why, tc.want)
			}
			if got != approval.Holds && why == "" {
				t.Fatal("no reason given")
			}
		})
	}

	// The example of the issue: a 5,000 refund spelled "5,000" or [5000]
	// gets the two-approver route, and Explain says why.
	p := &approval.Policy{
		Approvers: []*approval.Approver{{ID: "grace", Groups: []string{"finance"}}, {ID: "ada", Groups: []string{"finance"}}},
		Routes: []approval.RouteRule{
			{Name: "big-refunds", Match: approval.Match{Action: "http.request", When: []approval.Condition{gt}},
				ApproverGroups: []string{"finance"}, Required: 2},
			{Name: "refunds", Match: approval.Match{Action: "http.request", Attrs: map[string]string{"body.currency": "USD"}},
				ApproverGroups: []string{"finance"}},
		},
	}
	who := &approval.Principal{ID: "agent"}
	for _, amount := range []string{"5,000", approval.AttrOpaque("list"), "null"} {
		r, err := p.Resolve("http.request", who, map[string]string{"body.amount": amount, "body.currency": "USD"})
		if err != nil || r.Name != "big-refunds" || r.Required != 2 {
			t.Errorf("amount %q: route %+v, %v", amount, r, err)
		}
		ex := p.Explain("http.request", who, map[string]string{"body.amount": amount})
		if len(ex) != 1 || !ex[0].Matched || !strings.Contains(ex[0].Why, "cannot be evaluated") {
			t.Errorf("explain %q: %+v", amount, ex)
		}
	}
	// Exact attributes fail closed as well.
	r, err := p.Resolve("http.request", who, map[string]string{"body.amount": "5", "body.currency": approval.AttrOpaque("list")})
	if err != nil || r.Name != "refunds" {
		t.Errorf("currency list: %+v %v", r, err)
	}
}

func TestConditionValidate(t *testing.T) {
	for _, tc := range []struct {
		c  approval.Condition
		ok bool
	}{
		{approval.Condition{Attr: "a", Op: approval.OpEq, Values: []string{"x"}}, true},
		{approval.Condition{Attr: "", Op: approval.OpEq, Values: []string{"x"}}, false},
		{approval.Condition{Attr: "a", Op: approval.OpEq}, false},
		{approval.Condition{Attr: "a", Op: approval.OpIn}, false},
		{approval.Condition{Attr: "a", Op: approval.OpMatches, Values: []string{"[a-"}}, false},
		{approval.Condition{Attr: "a", Op: "approx"}, false},
		{approval.Condition{Attr: "a", Op: approval.OpGt, Number: 3}, true},
	} {
		if err := tc.c.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tc.c, err, tc.ok)
		}
	}
}

// TestRouteResolution: first match wins, by action, target, principal and
// conditions; approvers by id and group; forbid_self_approval; no_route.
func TestRouteResolution(t *testing.T) {
	support := &approval.Principal{ID: "support", Scopes: []string{"http.request:calendar", "email.send"}, OnBehalfOf: "sam"}
	ops := &approval.Principal{ID: "ops", Scopes: []string{"*"}}
	p := &approval.Policy{
		Principals: []*approval.Principal{support, ops},
		Approvers: []*approval.Approver{
			{ID: "grace", Groups: []string{"owners", "finance"}},
			{ID: "ada", Groups: []string{"finance"}},
			{ID: "sam", Groups: []string{"staff"}},
		},
		Routes: []approval.RouteRule{
			{Name: "big-invoices", Match: approval.Match{Action: "http.request", Target: "billing",
				When: []approval.Condition{{Attr: "body.amount", Op: approval.OpGt, Number: 1000}}},
				ApproverGroups: []string{"finance"}, Required: 2, Notify: []string{"email"}},
			{Name: "billing", Match: approval.Match{Action: "http.request", Target: "billing"},
				ApproverGroups: []string{"finance"}, Notify: []string{"email"}},
			{Name: "deletes", Match: approval.Match{Action: "http.request", Attrs: map[string]string{"method": "DELETE"}},
				ApproverIDs: []string{"grace"}, Notify: []string{"console"}},
			{Name: "external-email", Match: approval.Match{Action: "email.send",
				When: []approval.Condition{{Attr: "outside_domains", Op: approval.OpGt, Number: 0}}},
				ApproverGroups: []string{"owners"}, Notify: []string{"email"}, ForbidSelfApproval: true},
			{Name: "ops-anything", Match: approval.Match{Principal: "ops"}, ApproverIDs: []string{"sam"}, Notify: []string{"console"}},
			{Name: "self-only", Match: approval.Match{Action: "email.send"}, ApproverIDs: []string{"sam"}, Notify: []string{"email"},
				ForbidSelfApproval: true},
			{Name: "slack", Match: approval.Match{Action: "slack.*"}, ApproverIDs: []string{"sam", "grace"}, Notify: []string{"slack:#a"}},
		},
	}
	for _, tc := range []struct {
		name      string
		action    string
		who       *approval.Principal
		attrs     map[string]string
		route     string
		approvers string
		required  int
		code      approval.Code
	}{
		{"big invoice", "http.request", support, map[string]string{"target": "billing", "body.amount": "5000"}, "big-invoices", "grace,ada", 2, ""},
		{"small invoice", "http.request", support, map[string]string{"target": "billing", "body.amount": "50"}, "billing", "grace,ada", 1, ""},
		{"invoice without amount", "http.request", support, map[string]string{"target": "billing"}, "billing", "grace,ada", 1, ""},
		{"calendar delete", "http.request", support, map[string]string{"target": "calendar", "method": "DELETE"}, "deletes", "grace", 1, ""},
		{"external email leaves out the requester's human", "email.send", support, map[string]string{"outside_domains": "2"}, "external-email", "grace", 1, ""},
		{"ops principal", "http.request", ops, map[string]string{"target": "calendar", "method": "PATCH"}, "ops-anything", "sam", 1, ""},
		{"family match", "slack.post_message", support, nil, "slack", "grace,sam", 1, ""},
		{"self approval leaves no approver", "email.send", support, map[string]string{"outside_domains": "0"}, "", "", 0, approval.CodeNoRoute},
		{"nothing matches", "http.request", support, map[string]string{"target": "calendar", "method": "PATCH"}, "", "", 0, approval.CodeNoRoute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := p.Resolve(tc.action, tc.who, tc.attrs)
			if tc.code != "" {
				if got := approval.ErrorCode(err); got != tc.code {
					t.Fatalf("err = %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Name; got != tc.route {
				t.Fatalf("route = %s, want %s", got, tc.route)
			}
			if got := join(r.Approvers); got != tc.approvers {
				t.Fatalf("approvers = %s, want %s", got, tc.approvers)
			}
			if r.Required != tc.required {
				t.Fatalf("required = %d, want %d", r.Required, tc.required)
			}
			// Explain agrees with Resolve, and says why earlier routes were skipped.
			ex := p.Explain(tc.action, tc.who, tc.attrs)
			last := ex[len(ex)-1]
			if !last.Matched || last.Name != tc.route {
				t.Fatalf("explain ends with %+v", last)
			}
			for _, c := range ex[:len(ex)-1] {
				if c.Matched || c.Why == "" {
					t.Fatalf("explain: %+v", c)
				}
			}
		})
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

func TestScopes(t *testing.T) {
	for _, tc := range []struct {
		scopes []string
		scope  string
		want   bool
	}{
		{[]string{"http.request:calendar"}, "http.request:calendar", true},
		{[]string{"http.request:calendar"}, "http.request:billing", false},
		{[]string{"http.request:calendar"}, "http.request", false},
		{[]string{"http.request"}, "http.request:billing", true},
		{[]string{"*"}, "http.request:billing", true},
		{[]string{"email.send"}, "http.request:calendar", false},
		{[]string{"http.request:cal"}, "http.request:calendar", false},
	} {
		p := &approval.Principal{ID: "p", Scopes: tc.scopes}
		if got := p.Allows(tc.scope); got != tc.want {
			t.Errorf("%v allows %s = %v, want %v", tc.scopes, tc.scope, got, tc.want)
		}
	}
}

func TestMatchString(t *testing.T) {
	m := approval.Match{Action: "http.request", Target: "billing", Attrs: map[string]string{"method": "PUT"},
		When: []approval.Condition{{Attr: "body.amount", Op: approval.OpGt, Number: 1000},
			{Attr: "method", Op: approval.OpIn, Values: []string{"PUT", "PATCH"}}}}
	if got, want := m.String(), `action=http.request target=billing method=PUT body.amount > 1000 method in [PUT PATCH]`; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if got := (approval.Match{}).String(); got != "everything" {
		t.Fatalf("empty = %q", got)
	}
}
