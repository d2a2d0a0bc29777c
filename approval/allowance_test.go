package approval_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
)

// grant asks for an allowance, has grace approve it by her link, and waits
// until it is active.
func (h *harness) grant(t *testing.T, input string) *approval.Operation {
	t.Helper()
	op, _, err := h.svc.RequestAllowance(bg, h.agent, json.RawMessage(input), "")
	if err != nil {
		t.Fatalf("request allowance: %v", err)
	}
	if op.Status != approval.StatusPending || op.Action != approval.GrantAction {
		t.Fatalf("allowance request: %s %s", op.Action, op.Status)
	}
	var link string
	for deadline := time.Now().Add(5 * time.Second); link == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		links, _ := h.inbox.linksOf("grace")
		for _, l := range links {
			if v, _ := h.svc.OpenLink(bg, l); v.Problem == approval.LinkOK && v.Op.Key == op.Key {
				link = l
			}
		}
	}
	if _, res, err := h.svc.DecideByLink(bg, link, true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("grace approves the allowance: %v %v", res, err)
	}
	return h.waitStatus(t, op.Key, approval.StatusSucceeded)
}

func (h *harness) prepareNote(t *testing.T, n int, note string) *approval.Operation {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"n": n, "note": note})
	op, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: b})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

func TestAllowanceApprovesWithinItsBudget(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 2)
	g := h.grant(t, `{"action":"test.effect","match":{"note":["weekly"]},"budget":{"count":3},"ttl":"72h","reason":"weekly reminders"}`)
	if !strings.Contains(g.Preview.Summary, "up to 3") || !strings.Contains(g.Preview.Summary, "without asking") {
		t.Fatalf("the preview does not say plainly what it allows: %q", g.Preview.Summary)
	}
	before := h.inbox.count()
	for i := range 3 {
		op := h.prepareNote(t, i, "weekly")
		sent := h.send(t, op.Key)
		if sent.Status != approval.StatusApproved && sent.Status != approval.StatusExecuting && sent.Status != approval.StatusSucceeded {
			t.Fatalf("op %d within the allowance: %s", i, sent.Status)
		}
		done := h.waitStatus(t, op.Key, approval.StatusSucceeded)
		if done.Allowance != g.Key || len(done.Approvals) != 1 || done.Approvals[0].Via != "allowance" {
			t.Fatalf("approved by %q: %+v", done.Allowance, done.Approvals)
		}
	}
	if h.inbox.count() != before {
		t.Fatal("an operation approved by the allowance notified someone")
	}
	// Budget spent: the fourth goes to a human.
	op := h.prepareNote(t, 9, "weekly")
	if sent := h.send(t, op.Key); sent.Status != approval.StatusPending {
		t.Fatalf("past the budget: %s", sent.Status)
	}
	// Outside the match: to a human too.
	op = h.prepareNote(t, 1, "something else")
	if sent := h.send(t, op.Key); sent.Status != approval.StatusPending {
		t.Fatalf("outside the match: %s", sent.Status)
	}
	evs, _ := h.svc.Events(bg, h.agent, g.Key)
	_ = evs
}

func TestAllowanceSumAndRevocation(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 2)
	g := h.grant(t, `{"action":"test.effect","match":{"n":{"max":100}},"budget":{"sum":{"attr":"n","max":10}},"ttl":"1h","reason":"small ones"}`)
	send := func(n int) approval.Status {
		return h.send(t, h.prepareNote(t, n, "x").Key).Status
	}
	if st := send(6); st == approval.StatusPending {
		t.Fatal("6 of 10 went to a human")
	}
	if st := send(5); st != approval.StatusPending {
		t.Fatalf("6+5 > 10 was approved: %s", st)
	}
	if st := send(4); st == approval.StatusPending {
		t.Fatal("6+4 went to a human")
	}
	if st := send(101); st != approval.StatusPending {
		t.Fatal("n=101, outside the match, was approved")
	}
	// Revoked, it approves nothing more.
	g2 := h.grant(t, `{"action":"test.effect","match":{"note":["y"]},"budget":{"count":100},"ttl":"1h","reason":"r"}`)
	if _, err := h.svc.RevokeAllowanceAs(bg, g2.Key, "ada"); err == nil {
		t.Fatal("ada, not an approver of the allowance, revoked it")
	}
	if _, err := h.svc.RevokeAllowanceAs(bg, g2.Key, "grace"); err != nil {
		t.Fatal(err)
	}
	if st := h.send(t, h.prepareNote(t, 1, "y").Key).Status; st != approval.StatusPending {
		t.Fatalf("after revocation: %s", st)
	}
	_ = g
}

func TestAllowanceNeverApprovesIrreversibleUnlessTheRouteAllows(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 2)
	h.grant(t, `{"action":"test.effect","budget":{"count":10},"ttl":"1h","reason":"r"}`)
	if st := h.send(t, h.prepareNote(t, 1, "irreversible").Key).Status; st != approval.StatusPending {
		t.Fatalf("an irreversible operation was approved by an allowance: %s", st)
	}
	h2 := newHarness(t, opts{route: func(r *approval.RouteRule) { r.Allowances = true }})
	h2.run(t, 2)
	h2.grant(t, `{"action":"test.effect","budget":{"count":10},"ttl":"1h","reason":"r"}`)
	if st := h2.send(t, h2.prepareNote(t, 1, "irreversible").Key).Status; st == approval.StatusPending {
		t.Fatal("allowances: allow, and still pending")
	}
}

// Two replicas send at once: the allowance approves exactly its budget.
func TestAllowanceNeverOverspentAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	a := newHarnessOn(t, srv.Client(t), opts{})
	b := newHarnessOn(t, srv.Client(t), opts{share: a})
	a.run(t, 2)
	b.run(t, 2)
	a.grant(t, `{"action":"test.effect","budget":{"count":5},"ttl":"1h","reason":"r"}`)
	var ops []*approval.Operation
	for i := range 24 {
		ops = append(ops, a.prepareNote(t, i, "z"))
	}
	var wg sync.WaitGroup
	var allowed atomic.Int32
	for i, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := []*harness{a, b}[i%2]
			sent, err := h.svc.Send(bg, h.agent, op.Key)
			if err != nil {
				t.Error(err)
				return
			}
			if sent.Allowance != "" {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := allowed.Load(); n != 5 {
		t.Fatalf("the allowance approved %d operations, its budget is 5", n)
	}
}

func TestAllowanceRequestsAreChecked(t *testing.T) {
	h := newHarness(t, opts{})
	for name, in := range map[string]string{
		"no budget":      `{"action":"test.effect","ttl":"1h","reason":"r"}`,
		"too long":       `{"action":"test.effect","budget":{"count":1},"ttl":"8d","reason":"r"}`,
		"no reason":      `{"action":"test.effect","budget":{"count":1},"ttl":"1h"}`,
		"unknown action": `{"action":"nope","budget":{"count":1},"ttl":"1h","reason":"r"}`,
		"grants":         `{"action":"allowance.grant","budget":{"count":1},"ttl":"1h","reason":"r"}`,
		"bad match":      `{"action":"test.effect","match":{"n":{"lots":1}},"budget":{"count":1},"ttl":"1h","reason":"r"}`,
		// A NUL-led value is what an action reports for an object, a list
		// or an unreadable string: allowing it would allow any of those.
		"marker value":  `{"action":"test.effect","match":{"note":["\u0000object"]},"budget":{"count":1},"ttl":"1h","reason":"r"}`,
		"opaque value":  `{"action":"test.effect","match":{"note":{"in":["\u0000opaque long string"]}},"budget":{"count":1},"ttl":"1h","reason":"r"}`,
		"control value": `{"action":"test.effect","match":{"note":"a\nb"},"budget":{"count":1},"ttl":"1h","reason":"r"}`,
		"control attr":  `{"action":"test.effect","match":{"no\u0000te":["a"]},"budget":{"count":1},"ttl":"1h","reason":"r"}`,
		"control sum":   `{"action":"test.effect","budget":{"sum":{"attr":"\u0000n","max":5}},"ttl":"1h","reason":"r"}`,
		"long sum attr": `{"action":"test.effect","budget":{"sum":{"attr":"` + strings.Repeat("n", 101) + `","max":5}},"ttl":"1h","reason":"r"}`,
	} {
		if _, _, err := h.svc.RequestAllowance(bg, h.agent, json.RawMessage(in), ""); approval.ErrorCode(err) != approval.CodeInvalidInput {
			t.Errorf("%s: %v", name, err)
		}
	}
	h.agent.Scopes = []string{"email.send"}
	if _, _, err := h.svc.RequestAllowance(bg, h.agent, json.RawMessage(`{"action":"test.effect","budget":{"count":1},"ttl":"1h","reason":"r"}`), ""); approval.ErrorCode(err) != approval.CodeInsufficientScope {
		t.Errorf("out of scope: %v", err)
	}
}

// A value is matched whole against an allowance's list: only a list
// attribute (email.send's domains) is read element by element. A note
// "weekly,monthly" is neither "weekly" nor "monthly", so an allowance for
// those two does not approve it.
func TestAllowanceMatchesValuesWhole(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 2)
	h.grant(t, `{"action":"test.effect","match":{"note":["monthly","weekly"]},"budget":{"count":5},"ttl":"72h","reason":"reminders"}`)
	if sent := h.send(t, h.prepareNote(t, 1, "weekly,monthly").Key); sent.Status != approval.StatusPending {
		t.Fatalf("a value made of two allowed values joined by a comma: %s, want pending_approval", sent.Status)
	}
	if sent := h.send(t, h.prepareNote(t, 2, "weekly").Key); sent.Status == approval.StatusPending {
		t.Fatalf("an allowed value: %s", sent.Status)
	}
}

// An allowance bounded only by a sum approves any number of operations
// whose amount is 0: its preview says so plainly instead of reading as a
// bounded number of operations.
func TestSumOnlyAllowanceSaysItsCountIsUnbounded(t *testing.T) {
	h := newHarness(t, opts{})
	op, _, err := h.svc.RequestAllowance(bg, h.agent, json.RawMessage(
		`{"action":"test.effect","budget":{"sum":{"attr":"n","max":100}},"ttl":"72h","reason":"small ones"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(op.Preview.Summary, "any number of") {
		t.Errorf("summary %q does not say the number is unbounded", op.Preview.Summary)
	}
	found := false
	for _, w := range op.Preview.Warnings {
		found = found || strings.Contains(w, "n is 0")
	}
	if !found {
		t.Errorf("no warning that operations with n 0 are approved without limit: %q", op.Preview.Warnings)
	}
}

// TestAllowanceNotHonouredIsRefused: an allowance every operation of
// which would be irreversible is refused at once (policy_denied,
// allowance_not_honoured, the routes named, nothing stored) when no route
// those operations could take says allowances: allow, whatever the action;
// accepted when one does; and when only some of its operations would be
// irreversible, accepted with a preview that says those still go to a
// person.
func TestAllowanceNotHonouredIsRefused(t *testing.T) {
	onlyIrreversible := `{"action":"test.effect","match":{"note":["irreversible"]},"budget":{"count":3},"ttl":"1h","reason":"r"}`
	mixed := `{"action":"test.effect","budget":{"count":3},"ttl":"1h","reason":"r"}`
	reversible := `{"action":"test.effect","match":{"note":["weekly"]},"budget":{"count":3},"ttl":"1h","reason":"r"}`
	for _, tc := range []struct {
		name    string
		policy  func(*approval.Policy)
		input   string
		refused []string // the routes named, when refused
		partly  bool     // accepted, saying some operations still go to a person
	}{
		{name: "no route allows", input: onlyIrreversible, refused: []string{"test"}},
		{name: "the route allows", input: onlyIrreversible,
			policy: func(p *approval.Policy) { p.Routes[0].Allowances = true }},
		{name: "a route it cannot take allows", input: onlyIrreversible, refused: []string{"test"},
			policy: func(p *approval.Policy) {
				p.Routes = append([]approval.RouteRule{{Name: "weekly", Match: approval.Match{Action: "test.effect", Attrs: map[string]string{"note": "weekly"}},
					ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}, Allowances: true}}, p.Routes...)
			}},
		{name: "a route it may take allows", input: onlyIrreversible,
			policy: func(p *approval.Policy) {
				p.Routes = append([]approval.RouteRule{{Name: "big", Match: approval.Match{Action: "test.effect", Attrs: map[string]string{"n": "9"}},
					ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}, Allowances: true}}, p.Routes...)
			}},
		{name: "every route it may take is named", input: onlyIrreversible, refused: []string{"big", "test"},
			policy: func(p *approval.Policy) {
				p.Routes = append([]approval.RouteRule{{Name: "big", Match: approval.Match{Action: "test.effect", Attrs: map[string]string{"n": "9"}},
					ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}}}, p.Routes...)
			}},
		{name: "a route after one that takes them all is never reached", input: onlyIrreversible, refused: []string{"test"},
			policy: func(p *approval.Policy) {
				p.Routes = append(p.Routes, approval.RouteRule{Name: "later", Match: approval.Match{Action: "test.*"},
					ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}, Allowances: true})
			}},
		{name: "some irreversible", input: mixed, partly: true},
		{name: "some irreversible, route allows", input: mixed,
			policy: func(p *approval.Policy) { p.Routes[0].Allowances = true }},
		{name: "none irreversible", input: reversible},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, opts{policy: tc.policy})
			op, _, err := h.svc.RequestAllowance(bg, h.agent, json.RawMessage(tc.input), "")
			if tc.refused != nil {
				var e *approval.Error
				if !errors.As(err, &e) || e.Code != approval.CodePolicyDenied || e.Details["rule"] != approval.RuleAllowanceNotHonoured {
					t.Fatalf("got %v, want policy_denied allowance_not_honoured", err)
				}
				if got, want := fmt.Sprint(e.Details["routes"]), fmt.Sprint(tc.refused); got != want {
					t.Errorf("routes %s, want %s", got, want)
				}
				if list, err := h.svc.List(bg, h.agent, ""); err != nil || len(list) != 0 {
					t.Errorf("a refused allowance was stored: %v %v", list, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			said := strings.Contains(op.Preview.Summary, "still go to a person") &&
				slices.ContainsFunc(op.Preview.Warnings, func(w string) bool { return strings.Contains(w, "never approves irreversible test effects") })
			if said != tc.partly {
				t.Errorf("preview says some go to a person: %v, want %v (%q %q)", said, tc.partly, op.Preview.Summary, op.Preview.Warnings)
			}
		})
	}
}
