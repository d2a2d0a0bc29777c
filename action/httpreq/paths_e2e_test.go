package httpreq_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
)

// Guarantee 13 end to end: the real service, store and http.request action
// and a recording target. An agent spells one value twice (a member
// "customer.tier" beside customer.tier) so that the policy reads one
// spelling and the target the other; or writes a number that the
// canonical form rounds. Both are refused at prepare, nothing is stored,
// and nothing reaches the target.

// pathsEnv is newSvcEnv with a policy of its own: two approvers, and the
// given routes before a catch-all one-approver route.
func pathsEnv(t *testing.T, routes ...approval.RouteRule) *svcEnv {
	t.Helper()
	e := newSvcEnv(t, true)
	policy := &approval.Policy{
		Principals: []*approval.Principal{e.agent},
		Approvers: []*approval.Approver{{ID: "grace", Email: "grace@example.com"},
			{ID: "ada", Email: "ada@example.com"}},
		Routes: append(routes, approval.RouteRule{Name: "one", ApproverIDs: []string{"grace"}, Required: 1,
			Notify: []string{"console"}, Allowances: true}),
	}
	svc, err := approval.NewService(approval.Config{
		Store: e.store, Policy: policy, Actions: []approval.Action{e.action},
		Notifiers: map[string]approval.Notifier{"console": e.inbox}, Links: approval.RandomKeyring(),
		PublicURL: "http://countersign.test", Logger: slog.New(slog.NewJSONHandler(e.logs, nil)),
		OnEvent: []func(approval.Event){func(ev approval.Event) { e.mu.Lock(); e.events = append(e.events, ev); e.mu.Unlock() }},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

// refused prepares input and wants invalid_input naming field with rule,
// and nothing prepared.
func (e *svcEnv) refused(t *testing.T, input, field, rule string) {
	t.Helper()
	before := e.prepared()
	_, _, err := e.svc.Prepare(bg, e.agent, approval.PrepareCall{Action: httpreq.Name, Input: json.RawMessage(input)})
	var ae *approval.Error
	if !errors.As(err, &ae) || ae.Code != approval.CodeInvalidInput {
		t.Fatalf("prepare %s: %v, want invalid_input", input, err)
	}
	fs, _ := ae.Details["fields"].([]approval.FieldError)
	if len(fs) != 1 || fs[0].Field != field || ae.Details["rule"] != rule {
		t.Fatalf("prepare %s: fields %+v rule %v, want %s (%s)", input, fs, ae.Details["rule"], field, rule)
	}
	if e.prepared() != before {
		t.Fatalf("prepare %s was refused but recorded", input)
	}
}

// prepared counts the operations prepared so far.
func (e *svcEnv) prepared() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.events {
		if ev.Event == "prepared" {
			n++
		}
	}
	return n
}

var platinumRoute = approval.RouteRule{Name: "platinum",
	Match:       approval.Match{When: []approval.Condition{{Attr: "body.customer.tier", Op: approval.OpEq, Values: []string{"platinum"}}}},
	ApproverIDs: []string{"grace", "ada"}, Required: 2, Notify: []string{"console"}}

// The routing attack: both spellings, in either order, at the top, deeper,
// inside a list and in a bulk item, are refused.
func TestTwoSpellings_RoutingAttackIsRefused(t *testing.T) {
	e := pathsEnv(t, platinumRoute)
	for _, tc := range []struct{ input, field string }{
		{`{"target":"calendar","method":"POST","path":"/events","body":{"customer":{"tier":"gold"},"customer.tier":"platinum"}}`, "body.customer.tier"},
		{`{"target":"calendar","method":"POST","path":"/events","body":{"customer.tier":"platinum","customer":{"tier":"gold"}}}`, "body.customer.tier"},
		{`{"target":"calendar","method":"POST","path":"/events","body":{"customer":{"tier":"gold","tier":"platinum"}}}`, "body.customer.tier"},
		{`{"target":"calendar","method":"POST","path":"/events","body":{"a":{"customer":{"tier":"gold"}},"a.customer.tier":"platinum"}}`, "body.a.customer.tier"},
		{`{"target":"calendar","method":"POST","path":"/events","body":{"lines":[{"x":1},{"t":{"u":1},"t.u":2}]}}`, "body.lines.1.t.u"},
		{`{"target":"calendar","method":"POST","path":"/events","body":{"lines":[1,2],"lines.1":3}}`, "body.lines.1"},
		{`{"target":"calendar","items":[{"method":"POST","path":"/events","body":{"customer":{"tier":"gold"},"customer.tier":"platinum"}}]}`, "items.0.body.customer.tier"},
	} {
		e.refused(t, tc.input, tc.field, "ambiguous_name")
	}
	if n := len(e.target.writes()); n != 0 {
		t.Fatalf("%d writes reached the target", n)
	}
	// One spelling alone routes as written, whichever it is.
	for _, body := range []string{`{"customer":{"tier":"platinum"}}`, `{"customer.tier":"platinum"}`} {
		op := e.prepare(t, httpreq.Name, `{"target":"calendar","method":"POST","path":"/events","body":`+body+`}`)
		if op.Route.Name != "platinum" || op.Route.Required != 2 {
			t.Fatalf("%s took route %s (%d)", body, op.Route.Name, op.Route.Required)
		}
	}
}

// A member whose name holds dots and slashes alone is routable, by its
// dotted name or by its JSON Pointer.
func TestTwoSpellings_KeyWithDotsAndSlashesAloneRoutes(t *testing.T) {
	byPointer, err := approval.AttrName("/body/app.example~1name")
	if err != nil || byPointer != "body.app.example/name" {
		t.Fatalf("AttrName = %q, %v", byPointer, err)
	}
	for _, attr := range []string{"body.app.example/name", byPointer} {
		e := pathsEnv(t, approval.RouteRule{Name: "named",
			Match:       approval.Match{When: []approval.Condition{{Attr: attr, Op: approval.OpEq, Values: []string{"x"}}}},
			ApproverIDs: []string{"grace", "ada"}, Required: 2, Notify: []string{"console"}})
		op := e.prepare(t, httpreq.Name, `{"target":"calendar","method":"POST","path":"/events","body":{"app.example/name":"x","app":{"example":1}}}`)
		if op.Route.Name != "named" {
			t.Fatalf("attr %s: route %s", attr, op.Route.Name)
		}
	}
}

// The allowance attack: a sum budget of 100 on body.payment.amount. The
// policy must never read 1 where the target reads 90000, nor a number the
// canonical form rounds or flushes to zero.
func TestTwoSpellings_AllowanceBudgetAttackIsRefused(t *testing.T) {
	e := pathsEnv(t)
	g := e.grant(t, `{"action":"http.request","match":{"target":["calendar"]},`+
		`"budget":{"sum":{"attr":"/body/payment/amount","max":100}},"ttl":"1h","reason":"small payments"}`)
	post := func(body string) string {
		return `{"target":"calendar","method":"POST","path":"/events","body":` + body + `}`
	}
	for range 5 {
		e.refused(t, post(`{"payment":{"amount":90000},"payment.amount":1}`), "body.payment.amount", "ambiguous_name")
		e.refused(t, post(`{"payment.amount":1,"payment":{"amount":90000}}`), "body.payment.amount", "ambiguous_name")
		e.refused(t, post(`{"payment":{"amount":1e-400}}`), "body.payment.amount", "number_precision")
		e.refused(t, post(`{"payment":{"amount":9007199254740993}}`), "body.payment.amount", "number_precision")
		e.refused(t, post(`{"payment":{"amount":1e400}}`), "body.payment.amount", "number_precision")
	}
	if n := len(e.target.writes()); n != 0 {
		t.Fatalf("%d writes reached the target", n)
	}
	// What is accepted spends what the target receives.
	op := e.prepare(t, httpreq.Name, post(`{"payment":{"amount":40.5e0}}`))
	if _, err := e.svc.Send(bg, e.agent, op.Key); err != nil {
		t.Fatal(err)
	}
	if op = e.run(t, op.Key); op.Status != approval.StatusSucceeded || op.Allowance != g.Key {
		t.Fatalf("within the budget: %s via %q", op.Status, op.Allowance)
	}
	list, err := e.store.Allowances(bg, e.agent.ID)
	if err != nil || len(list) != 1 || list[0].SumLeft == nil || *list[0].SumLeft != 59.5 {
		t.Fatalf("allowances %+v %v, want 59.5 left", list, err)
	}
	w := e.target.writes()
	if len(w) != 1 || !strings.Contains(w[0].Body, `"amount":40.5`) {
		t.Fatalf("writes %+v", w)
	}
	// Over what is left: a human decides.
	op = e.prepare(t, httpreq.Name, post(`{"payment":{"amount":60}}`))
	if sent, err := e.svc.Send(bg, e.agent, op.Key); err != nil || sent.Status != approval.StatusPending {
		t.Fatalf("over the budget: %v %v", sent, err)
	}
}

// grant has the agent ask for an allowance and grace approve it.
func (e *svcEnv) grant(t *testing.T, input string) *approval.Operation {
	t.Helper()
	g, _, err := e.svc.RequestAllowance(bg, e.agent, json.RawMessage(input), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Reconcile(bg, g.Ref()); err != nil {
		t.Fatal(err)
	}
	if _, res := e.approve(t, e.inbox.link(t, g.Key)); res.Outcome != approval.DecideApproved {
		t.Fatalf("grant: %v", res.Outcome)
	}
	if g = e.run(t, g.Key); g.Status != approval.StatusSucceeded {
		t.Fatalf("grant: %s", g.Status)
	}
	return g
}

// A bulk writes every item: its sum budget spends the total over the
// items, not the one value they agree on.
func TestTwoSpellings_BulkSpendsItsTotal(t *testing.T) {
	e := pathsEnv(t)
	g := e.grant(t, `{"action":"http.request","match":{"target":["calendar"]},`+
		`"budget":{"sum":{"attr":"body.amount","max":100}},"ttl":"1h","reason":"small payments"}`)
	bulk := func(amounts ...string) string {
		var items []string
		for _, a := range amounts {
			items = append(items, `{"method":"POST","path":"/events","body":{"amount":`+a+`}}`)
		}
		return `{"target":"calendar","items":[` + strings.Join(items, ",") + `]}`
	}
	op := e.prepare(t, httpreq.Name, bulk("40", "40", "40"))
	if got := op.Attrs[approval.SumAttr("body.amount")]; got != "120" {
		t.Fatalf("sum(body.amount) = %q", got)
	}
	if c := (approval.Condition{Attr: "sum(body.amount)", Op: approval.OpGt, Number: 100}); !c.Holds(op.Attrs) {
		t.Fatalf("a route on sum(body.amount) > 100 does not hold for %q", op.Attrs)
	}
	if sent, err := e.svc.Send(bg, e.agent, op.Key); err != nil || sent.Status != approval.StatusPending {
		t.Fatalf("3 × 40 against a budget of 100: %v %v", sent.Status, err)
	}
	op = e.prepare(t, httpreq.Name, bulk("40", "30"))
	if _, err := e.svc.Send(bg, e.agent, op.Key); err != nil {
		t.Fatal(err)
	}
	if op = e.run(t, op.Key); op.Status != approval.StatusSucceeded || op.Allowance != g.Key {
		t.Fatalf("40 + 30: %s via %q", op.Status, op.Allowance)
	}
	list, err := e.store.Allowances(bg, e.agent.ID)
	if err != nil || len(list) != 1 || list[0].SumLeft == nil || *list[0].SumLeft != 30 {
		t.Fatalf("allowances %+v %v, want 30 left", list, err)
	}
	op = e.prepare(t, httpreq.Name, bulk("10", `"ten"`))
	if got := op.Attrs[approval.SumAttr("body.amount")]; !strings.HasPrefix(got, "\x00") {
		t.Fatalf("a total over a non-number: %q", got)
	}
	if sent, err := e.svc.Send(bg, e.agent, op.Key); err != nil || sent.Status != approval.StatusPending {
		t.Fatalf("a bulk with an amount that is not a number: %v %v", sent.Status, err)
	}
}
