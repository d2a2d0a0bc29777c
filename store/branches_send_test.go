package store_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// The guards of send's allowance spend (its end, revocation, count and sum
// budgets) and of capability's replaced links, branch by branch.

// sendSpending sends a new draft of agent with allowance id spending amount.
func (f *fixture) sendSpending(id string, amount float64) *approval.Operation {
	f.t.Helper()
	op := f.draft("agent", 10)
	_, after, err := f.st.Send(bg, op.Ref(), approval.SendTransition{Step: step(f.now, "sent"),
		ExpiresAt: f.now.Add(time.Hour), TTL: 2 * time.Hour, Quotas: f.q,
		Spend:         &approval.Spend{Allowance: id, Amount: amount},
		AllowedEvents: []approval.Event{{Time: f.now, Event: "approval"}, {Time: f.now, Event: "approved"}}})
	if err != nil || after == nil {
		f.t.Fatalf("send: %v", err)
	}
	return after
}

// budget is what is left of allowance id ("-" for no budget, "gone" when
// it is not listed).
func (f *fixture) budget(id string) (count int, sum float64, ok bool) {
	f.t.Helper()
	all, err := f.st.Allowances(bg, "agent")
	if err != nil {
		f.t.Fatal(err)
	}
	for _, a := range all {
		if a.ID == id {
			count, sum = -1, -1
			if a.CountLeft != nil {
				count = *a.CountLeft
			}
			if a.SumLeft != nil {
				sum = *a.SumLeft
			}
			return count, sum, true
		}
	}
	return 0, 0, false
}

func TestSendScriptBranchesSpendAnAllowanceOnlyWhileItHolds(t *testing.T) {
	f := newFixture(t)
	count, sum := 2, 100.0
	if err := f.st.AddAllowance(bg, approval.Allowance{ID: "al1", Principal: "agent", Until: f.now.Add(time.Hour), CountLeft: &count, SumLeft: &sum}); err != nil {
		t.Fatal(err)
	}
	spent := func(name, id string, amount float64, approved bool, wantCount int, wantSum float64) {
		t.Helper()
		op := f.sendSpending(id, amount)
		if approved {
			if op.Status != approval.StatusApproved || op.Allowance != id || len(op.Approvals) != 1 || op.Approvals[0].Approver != "allowance:"+id {
				t.Fatalf("%s: %s by %q, approvals %+v", name, op.Status, op.Allowance, op.Approvals)
			}
		} else if op.Status != approval.StatusPending || op.Allowance != "" || len(op.Approvals) != 0 {
			t.Fatalf("%s: %s by %q, want pending for humans", name, op.Status, op.Allowance)
		}
		if id == "al1" {
			if c, s, _ := f.budget(id); c != wantCount || s != wantSum {
				t.Fatalf("%s: left %d and %v, want %d and %v", name, c, s, wantCount, wantSum)
			}
		}
	}
	spent("within both budgets", "al1", 60, true, 1, 40)
	spent("over the sum left", "al1", 40.5, false, 1, 40)
	spent("exactly the sum left, the last count", "al1", 40, true, 0, 0)
	spent("no count left", "al1", 0, false, 0, 0)
	if n := f.counter("agent", "nq"); n != 2 {
		t.Fatalf("approved waiting %d, want 2", n)
	}

	// Its end: approved up to the millisecond before it, not at it.
	for _, c := range []struct {
		id    string
		until time.Time
		ok    bool
	}{{"ends-now", f.now, false}, {"ends-next-ms", f.now.Add(time.Millisecond), true}} {
		if err := f.st.AddAllowance(bg, approval.Allowance{ID: c.id, Principal: "agent", Until: c.until}); err != nil {
			t.Fatal(err)
		}
		spent(c.id, c.id, 1e9, c.ok, 0, 0) // no budgets: any amount
	}
	spent("an unknown allowance", "nope", 1, false, 0, 0)

	// Revoked: nothing more is approved by it.
	grant := f.pending()
	big := 1e6
	if err := f.st.AddAllowance(bg, approval.Allowance{ID: grant.Key, Principal: "agent", Until: f.now.Add(time.Hour), SumLeft: &big}); err != nil {
		t.Fatal(err)
	}
	spent("before its revocation", grant.Key, 1, true, 0, 0)
	if ok, err := f.st.RevokeAllowance(bg, grant.Ref(), step(f.now, "allowance_revoked")); err != nil || !ok {
		t.Fatal(ok, err)
	}
	spent("after its revocation", grant.Key, 1, false, 0, 0)
}

func TestCapabilityScriptBranchesReplaceOnlyTheSameApproverAndChannel(t *testing.T) {
	f := newFixture(t)
	op := f.pending()
	add := func(nonce, who, channel string) bool {
		t.Helper()
		ok, err := f.st.AddCapability(bg, op.Ref(), nonce, approval.Capability{Approver: who, Channel: channel, Expires: f.now.Add(time.Hour)}, f.now)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	revoked := func(nonce string) bool {
		t.Helper()
		c, err := f.st.Capability(bg, op.Ref(), nonce)
		if err != nil || c == nil {
			t.Fatalf("capability %s: %v %v", nonce, c, err)
		}
		return c.Revoked
	}
	for _, c := range [][3]string{{"n1", "grace", "email"}, {"n2", "grace", "slack"}, {"n3", "ada", "email"}} {
		if !add(c[0], c[1], c[2]) {
			t.Fatalf("%s not stored", c[0])
		}
	}
	// A reminder's link for grace by email replaces her first one only.
	if !add("n4", "grace", "email") {
		t.Fatal("n4 not stored")
	}
	if !revoked("n1") || revoked("n2") || revoked("n3") || revoked("n4") {
		t.Fatalf("replaced: n1 %v n2 %v n3 %v n4 %v", revoked("n1"), revoked("n2"), revoked("n3"), revoked("n4"))
	}
	// Storing n4 again replaces nothing, not even itself.
	if !add("n4", "grace", "email") || revoked("n4") {
		t.Fatal("a link replaced itself")
	}
	decide := func(nonce string) approval.DecideOutcome {
		t.Helper()
		tr := f.decision(op, "grace", true)
		tr.NonceHash = nonce
		res, err := f.st.Decide(bg, op.Ref(), tr)
		if err != nil {
			t.Fatal(err)
		}
		return res.Outcome
	}
	if got := decide("n1"); got != approval.DecideUnknownLink {
		t.Fatalf("the replaced link: %s", got)
	}
	if got := decide("n4"); got != approval.DecideRecorded {
		t.Fatalf("the live link: %s", got)
	}
	// Links are stored only while the operation is pending.
	d := f.draft("agent", 10)
	before := f.hash(d)
	if ok, err := f.st.AddCapability(bg, d.Ref(), "n9", approval.Capability{Approver: "grace", Channel: "email", Expires: f.now.Add(time.Hour)}, f.now); err != nil || ok {
		t.Fatalf("a draft's link: %v %v", ok, err)
	}
	f.unchanged(d, before)
	f.approve(op, "ada")
	before = f.hash(op)
	if add("n5", "ada", "slack") {
		t.Fatal("a link was stored for an approved operation")
	}
	f.unchanged(op, before)
}
