package approval_test

import (
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
		{approval.Condition{Attr: "body.note", Op: approval.OpGt, Number: 0}, false},       // not a number
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
