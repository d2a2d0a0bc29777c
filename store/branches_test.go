package store_test

import (
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// Every branch of the scripts that had no test of their own (expire,
// undelivered, undone, revoke, allowance, escalate, remind, supersede;
// advance, lease, limit and rate in branches_limits_test.go): each test
// pins the reply, the state after, and that a refusing branch changed
// nothing (STYLE 16).

// pending stores a draft of agent and sends it: pending_approval until
// f.now+1h, approvers grace and ada, two required.
func (f *fixture) pending() *approval.Operation {
	f.t.Helper()
	op := f.draft("agent", 10)
	f.send(op)
	return f.get(op)
}

// hash is the operation's stored hash, to show that a refusal wrote nothing.
func (f *fixture) hash(op *approval.Operation) map[string]string {
	f.t.Helper()
	keys, err := f.rdb.Keys(bg, "cs:*:o:"+op.Key).Result()
	if err != nil || len(keys) != 1 {
		f.t.Fatalf("keys of %s: %v %v", op.Key, keys, err)
	}
	h, err := f.rdb.HGetAll(bg, keys[0]).Result()
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// unchanged fails unless op's hash is still before.
func (f *fixture) unchanged(op *approval.Operation, before map[string]string) {
	f.t.Helper()
	if after := f.hash(op); !maps.Equal(before, after) {
		f.t.Fatalf("a refused transition changed the operation:\nbefore %v\nafter  %v", before, after)
	}
}

// eventNames lists the names in op's trail.
func (f *fixture) eventNames(op *approval.Operation) string {
	f.t.Helper()
	evs, err := f.st.Events(bg, op.Ref())
	if err != nil {
		f.t.Fatal(err)
	}
	var n []string
	for _, e := range evs {
		n = append(n, e.Event)
	}
	return strings.Join(n, ",")
}

// one returns the single key matching pattern.
func (f *fixture) one(pattern string) string {
	f.t.Helper()
	keys, err := f.rdb.Keys(bg, pattern).Result()
	if err != nil || len(keys) != 1 {
		f.t.Fatalf("keys %s: %v %v", pattern, keys, err)
	}
	return keys[0]
}

func (f *fixture) counter(p, field string) int64 {
	f.t.Helper()
	n, _ := f.rdb.HGet(bg, f.one("cs:*:p:"+p), field).Int64()
	return n
}

func nobody() approval.Ref { return approval.Ref{Principal: "agent", Key: approval.NewOperationKey()} }

func TestExpireScriptBranches(t *testing.T) {
	f := newFixture(t)
	window := f.now.Add(time.Hour) // the pending operations' end

	if _, _, err := f.st.Expire(bg, nobody(), step(window, "expired")); code(err) != approval.CodeNotFound {
		t.Fatalf("missing: %v", err)
	}

	op := f.pending()
	before := f.hash(op)
	st, moved, err := f.st.Expire(bg, op.Ref(), step(window.Add(-time.Millisecond), "expired"))
	if err != nil || moved || st != approval.StatusPending {
		t.Fatalf("a millisecond before its end: %s %v %v", st, moved, err)
	}
	f.unchanged(op, before)

	st, moved, err = f.st.Expire(bg, op.Ref(), step(window, "expired"))
	if err != nil || !moved || st != approval.StatusPending {
		t.Fatalf("at its end: %s %v %v", st, moved, err)
	}
	if cur := f.get(op); cur.Status != approval.StatusExpired || cur.Version != op.Version+1 {
		t.Fatalf("after: %s v%d", cur.Status, cur.Version)
	}
	if u := f.usage("agent"); u.Pending != 0 {
		t.Fatalf("the pending quota was not released: %+v", u)
	}
	if got := f.eventNames(op); got != "prepared,sent,expired" {
		t.Fatalf("events %s", got)
	}
	// Terminal: a second expiry changes nothing.
	before = f.hash(op)
	if st, moved, err := f.st.Expire(bg, op.Ref(), step(window.Add(time.Hour), "expired")); err != nil || moved || st != approval.StatusExpired {
		t.Fatalf("again: %s %v %v", st, moved, err)
	}
	f.unchanged(op, before)

	// A draft past its ttl: its input goes at once, with its bytes.
	d := f.draft("agent", 500)
	if u := f.usage("agent"); u.Drafts != 1 || u.StoredBytes < 500 {
		t.Fatalf("usage %+v", u)
	}
	if st, moved, err := f.st.Expire(bg, d.Ref(), step(d.ExpiresAt, "expired")); err != nil || !moved || st != approval.StatusDraft {
		t.Fatalf("draft: %s %v %v", st, moved, err)
	}
	if u := f.usage("agent"); u.Drafts != 0 {
		t.Fatalf("the draft quota was not released: %+v", u)
	}
	if h := f.hash(d); h["in"] != "" || h["sz"] != "0" || h["st"] != "expired" {
		t.Fatalf("the expired draft kept its input: st=%s sz=%s in=%d bytes", h["st"], h["sz"], len(h["in"]))
	}

	// Approved and past its window: expires and leaves the claim queue.
	a := f.pending()
	f.approve(a, "grace")
	f.approve(a, "ada")
	if n := f.counter("agent", "nq"); n != 1 {
		t.Fatalf("approved waiting = %d", n)
	}
	if st, moved, err := f.st.Expire(bg, a.Ref(), step(window, "expired")); err != nil || !moved || st != approval.StatusApproved {
		t.Fatalf("approved: %s %v %v", st, moved, err)
	}
	if n := f.counter("agent", "nq"); n != 0 {
		t.Fatalf("approved waiting after expiry = %d", n)
	}

	// Executing is not expirable, whatever the clock.
	x := f.pending()
	f.approve(x, "grace")
	f.approve(x, "ada")
	if ok, _, err := f.st.Claim(bg, x.Ref(), claim(f.now, "w1")); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	before = f.hash(x)
	if st, moved, err := f.st.Expire(bg, x.Ref(), step(window.Add(time.Hour), "expired")); err != nil || moved || st != approval.StatusExecuting {
		t.Fatalf("executing: %s %v %v", st, moved, err)
	}
	f.unchanged(x, before)
}

func TestUndeliveredScriptBranchesBackOffAndAuditSomeAttempts(t *testing.T) {
	f := newFixture(t)
	op := f.pending()
	ev := approval.Event{Time: f.now, Event: "notify_failed", Actor: "system", Details: map[string]any{"job": "slack:ada"}}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
		64 * time.Second, 128 * time.Second, 256 * time.Second, 300 * time.Second, 300 * time.Second, 300 * time.Second}
	for i, w := range want {
		n, wait, err := f.st.FailDelivery(bg, op.Ref(), "slack:ada", 0, ev)
		if err != nil || n != i+1 || wait != w {
			t.Fatalf("attempt %d: n=%d wait=%s err=%v, want wait %s", i+1, n, wait, err, w)
		}
		at, err := f.rdb.ZScore(bg, f.one("cs:*:t"), op.Key+"|agent|job:slack:ada").Result()
		if err != nil || int64(at) != f.now.Add(w).UnixMilli() {
			t.Fatalf("attempt %d: retry timer at %v (%v), want %v", i+1, at, err, f.now.Add(w).UnixMilli())
		}
	}
	// The lease of the job is held for the backoff: nobody retries sooner.
	if ok, wait, err := f.st.Lease(bg, op.Ref(), "job:slack:ada", "worker", time.Minute); err != nil || ok || wait <= 0 || wait > 300*time.Second {
		t.Fatalf("job lease during backoff: ok=%v wait=%s err=%v", ok, wait, err)
	}
	// Attempts 1, 2, 3 and 10 are audited, with their number and wait.
	evs, err := f.st.Events(bg, op.Ref())
	if err != nil {
		t.Fatal(err)
	}
	var attempts []string
	for _, e := range evs {
		if e.Event == "notify_failed" {
			attempts = append(attempts, anyString(e.Details["attempt"])+"/"+anyString(e.Details["retry_in_seconds"]))
		}
	}
	if got := strings.Join(attempts, ","); got != "1/2,2/4,3/8,10/300" {
		t.Fatalf("audited attempts %s", got)
	}
	// A caller's own floor wins over a shorter backoff.
	n, wait, err := f.st.FailDelivery(bg, op.Ref(), "email:grace", 45*time.Second, ev)
	if err != nil || n != 1 || wait != 45*time.Second {
		t.Fatalf("least: n=%d wait=%s err=%v", n, wait, err)
	}
}

func anyString(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	return "?"
}

func TestUndoneScriptBranchesLinkOnlyFromTheExpectedLink(t *testing.T) {
	f := newFixture(t)
	keys := f.keys()
	if ok, err := f.st.SetUndoneBy(bg, nobody(), "", "u1", f.now); err != nil || ok {
		t.Fatalf("missing: %v %v", ok, err)
	}
	if f.keys() != keys {
		t.Fatal("a missing operation was created")
	}
	op := f.pending()
	if ok, err := f.st.SetUndoneBy(bg, op.Ref(), "u0", "u1", f.now); err != nil || ok {
		t.Fatalf("wrong prev on an unlinked operation: %v %v", ok, err)
	}
	if ok, err := f.st.SetUndoneBy(bg, op.Ref(), "", "u1", f.now); err != nil || !ok {
		t.Fatalf("first link: %v %v", ok, err)
	}
	cur := f.get(op)
	if cur.UndoneBy != "u1" || cur.Version != op.Version+1 {
		t.Fatalf("after: undone_by=%q v%d", cur.UndoneBy, cur.Version)
	}
	before := f.hash(op)
	for _, prev := range []string{"", "u2"} {
		if ok, err := f.st.SetUndoneBy(bg, op.Ref(), prev, "u3", f.now); err != nil || ok {
			t.Fatalf("prev %q while linked to u1: %v %v", prev, ok, err)
		}
	}
	f.unchanged(op, before)
	if ok, err := f.st.SetUndoneBy(bg, op.Ref(), "u1", "u2", f.now); err != nil || !ok || f.get(op).UndoneBy != "u2" {
		t.Fatalf("relink from u1: %v %v", ok, err)
	}
}

func TestAllowanceScriptBranchesActivateOnce(t *testing.T) {
	f := newFixture(t)
	count, sum := 3, 100.5
	until := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	a := approval.Allowance{ID: "al1", Principal: "agent", Until: until, CountLeft: &count, SumLeft: &sum}
	if err := f.st.AddAllowance(bg, a); err != nil {
		t.Fatal(err)
	}
	key := f.one("cs:*:al:agent")
	ttl := f.rdb.PTTL(bg, key).Val()
	if day := 24 * time.Hour; ttl < day+time.Hour-time.Minute || ttl > day+time.Hour {
		t.Fatalf("allowances live %s, want a day past the end", ttl)
	}
	// A second activation (another count, a shorter end) changes nothing.
	other, short := 9, time.Now().Add(time.Minute)
	if err := f.st.AddAllowance(bg, approval.Allowance{ID: "al1", Principal: "agent", Until: short, CountLeft: &other}); err != nil {
		t.Fatal(err)
	}
	// One without budgets, ending sooner, does not shorten the others' life.
	if err := f.st.AddAllowance(bg, approval.Allowance{ID: "al2", Principal: "agent", Until: short}); err != nil {
		t.Fatal(err)
	}
	if got := f.rdb.PTTL(bg, key).Val(); got < ttl-time.Minute {
		t.Fatalf("a shorter allowance shortened the hash's life: %s < %s", got, ttl)
	}
	// One ending later lengthens it.
	if err := f.st.AddAllowance(bg, approval.Allowance{ID: "al3", Principal: "agent", Until: until.Add(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := f.rdb.PTTL(bg, key).Val(); got < ttl+47*time.Hour {
		t.Fatalf("a longer allowance did not lengthen the hash's life: %s", got)
	}
	all, err := f.st.Allowances(bg, "agent")
	if err != nil || len(all) != 3 {
		t.Fatalf("allowances %v %v", all, err)
	}
	for _, al := range all {
		switch al.ID {
		case "al1":
			if !al.Until.Equal(until) || al.CountLeft == nil || *al.CountLeft != 3 || al.SumLeft == nil || *al.SumLeft != 100.5 {
				t.Fatalf("al1 = %+v", al)
			}
		case "al2", "al3":
			if al.CountLeft != nil || al.SumLeft != nil {
				t.Fatalf("%s has a budget: %+v", al.ID, al)
			}
		}
	}
}

func TestRevokeScriptBranches(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.RevokeAllowance(bg, nobody(), step(f.now, "revoked")); code(err) != approval.CodeNotFound {
		t.Fatalf("missing: %v", err)
	}
	grant := f.pending() // stands for the allowance.grant operation
	if err := f.st.AddAllowance(bg, approval.Allowance{ID: grant.Key, Principal: "agent", Until: f.now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	s := step(f.now, "allowance_revoked")
	if ok, err := f.st.RevokeAllowance(bg, grant.Ref(), s); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	if all, _ := f.st.Allowances(bg, "agent"); len(all) != 0 {
		t.Fatalf("a revoked allowance is still listed: %+v", all[0])
	}
	cur := f.get(grant)
	if cur.RevokedAt == nil || !cur.RevokedAt.Equal(f.now) || cur.Version != grant.Version+1 {
		t.Fatalf("after: revoked_at=%v v%d", cur.RevokedAt, cur.Version)
	}
	before := f.hash(grant)
	// Its own retry reads as revoked; anyone else's as done before.
	if ok, err := f.st.RevokeAllowance(bg, grant.Ref(), s); err != nil || !ok {
		t.Fatalf("retry: %v %v", ok, err)
	}
	if ok, err := f.st.RevokeAllowance(bg, grant.Ref(), step(f.now.Add(time.Second), "allowance_revoked")); err != nil || ok {
		t.Fatalf("second revoke: %v %v", ok, err)
	}
	f.unchanged(grant, before)
	if got := f.eventNames(grant); got != "prepared,sent,allowance_revoked" {
		t.Fatalf("events %s", got)
	}
}

func escalation(now time.Time) approval.EscalateTransition {
	return approval.EscalateTransition{Step: step(now, "escalated"),
		Escalated: approval.Escalated{At: now, Approvers: []string{"lin"}},
		Jobs:      []approval.Job{{ID: "email:lin", Channel: "email", Approver: "lin", Link: true}}}
}

func hasJob(op *approval.Operation, id string) bool {
	for _, j := range op.Jobs {
		if j.ID == id {
			return true
		}
	}
	return false
}

func TestEscalateScriptBranches(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.Escalate(bg, nobody(), escalation(f.now)); code(err) != approval.CodeNotFound {
		t.Fatalf("missing: %v", err)
	}
	op := f.pending()
	queue := f.one("cs:*:q")
	queued := f.rdb.XLen(bg, queue).Val()
	tr := escalation(f.now)
	if ok, err := f.st.Escalate(bg, op.Ref(), tr); err != nil || !ok {
		t.Fatalf("escalate: %v %v", ok, err)
	}
	cur := f.get(op)
	if cur.Escalated == nil || strings.Join(cur.Escalated.Approvers, ",") != "lin" || !cur.HasApprover("lin") ||
		!hasJob(cur, "email:lin") || cur.Version != op.Version+1 {
		t.Fatalf("after: %+v jobs %+v v%d", cur.Escalated, cur.Jobs, cur.Version)
	}
	if n := f.rdb.XLen(bg, queue).Val(); n != queued+1 {
		t.Fatalf("the operation was not queued for its new jobs: %d → %d", queued, n)
	}
	before := f.hash(op)
	if ok, err := f.st.Escalate(bg, op.Ref(), tr); err != nil || !ok {
		t.Fatalf("retry: %v %v", ok, err)
	}
	again := escalation(f.now.Add(time.Minute))
	again.Escalated.Approvers = []string{"mallory"}
	if ok, err := f.st.Escalate(bg, op.Ref(), again); err != nil || ok {
		t.Fatalf("second escalation: %v %v", ok, err)
	}
	f.unchanged(op, before)
	if got := f.eventNames(op); got != "prepared,sent,escalated" {
		t.Fatalf("events %s", got)
	}

	// Only a pending operation escalates.
	d := f.draft("agent", 10)
	before = f.hash(d)
	if ok, err := f.st.Escalate(bg, d.Ref(), escalation(f.now)); err != nil || ok {
		t.Fatalf("draft: %v %v", ok, err)
	}
	f.unchanged(d, before)
}

func reminder(now time.Time, n int) approval.RemindTransition {
	return approval.RemindTransition{Step: step(now, "reminded"), N: n,
		Jobs: []approval.Job{{ID: "email:ada:r" + string(rune('0'+n)), Channel: "email", Approver: "ada", Reminder: n}}}
}

func TestRemindScriptBranches(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.Remind(bg, nobody(), reminder(f.now, 1)); code(err) != approval.CodeNotFound {
		t.Fatalf("missing: %v", err)
	}
	op := f.pending()
	r1 := reminder(f.now, 1)
	if ok, err := f.st.Remind(bg, op.Ref(), r1); err != nil || !ok {
		t.Fatalf("remind: %v %v", ok, err)
	}
	cur := f.get(op)
	if len(cur.Reminded) != 1 || cur.Reminded[0].N != 1 || !cur.Reminded[0].At.Equal(f.now) || !hasJob(cur, "email:ada:r1") ||
		cur.Version != op.Version+1 {
		t.Fatalf("after: %+v v%d", cur.Reminded, cur.Version)
	}
	before := f.hash(op)
	if ok, err := f.st.Remind(bg, op.Ref(), r1); err != nil || !ok {
		t.Fatalf("retry: %v %v", ok, err)
	}
	if ok, err := f.st.Remind(bg, op.Ref(), reminder(f.now.Add(time.Minute), 1)); err != nil || ok {
		t.Fatalf("reminder 1 again: %v %v", ok, err)
	}
	f.unchanged(op, before)
	if ok, err := f.st.Remind(bg, op.Ref(), reminder(f.now.Add(time.Minute), 2)); err != nil || !ok {
		t.Fatalf("reminder 2: %v %v", ok, err)
	}
	if got := f.eventNames(op); got != "prepared,sent,reminded,reminded" {
		t.Fatalf("events %s", got)
	}
	// Only a pending operation is reminded.
	if _, _, err := f.st.Cancel(bg, op.Ref(), step(f.now, "canceled")); err != nil {
		t.Fatal(err)
	}
	before = f.hash(op)
	if ok, err := f.st.Remind(bg, op.Ref(), reminder(f.now.Add(time.Minute), 3)); err != nil || ok {
		t.Fatalf("canceled: %v %v", ok, err)
	}
	f.unchanged(op, before)
}

// edit builds the supersede transition of op by editor, with the
// editor's approval when approve, needing required approvals.
func (f *fixture) edit(op *approval.Operation, editor string, approve bool, required int, now time.Time) approval.SupersedeTransition {
	n := *op
	n.Key = approval.NewOperationKey()
	n.Input = []byte(`{"text":"edited"}`)
	n.PayloadHash = "sha256:" + approval.RandomToken(16)
	n.Supersedes = op.Key
	n.Route.Required = required
	n.Approvals, n.Jobs = nil, nil
	tr := approval.SupersedeTransition{Step: step(now, "superseded"), Next: &n,
		Prepared: approval.Event{Time: now, Event: "prepared"}, Sent: approval.Event{Time: now, Event: "sent"},
		TTL: 2 * time.Hour, Timers: []approval.Timer{{Reason: "remind:1", At: now.Add(30 * time.Minute)}},
		Changed: []string{"text"}, Editor: editor}
	if approve {
		tr.Approval = &approval.Decision{Approver: editor, Via: "test", At: now, PayloadHash: n.PayloadHash}
		tr.ApprovalEvent = approval.Event{Time: now, Event: "approval"}
		tr.QuorumEvent = approval.Event{Time: now, Event: "approved"}
	}
	return tr
}

func TestSupersedeScriptBranches(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.Supersede(bg, nobody(), f.edit(f.pending(), "grace", false, 2, f.now)); code(err) != approval.CodeNotFound {
		t.Fatalf("missing: %v", err)
	}
	refused := func(name string, op *approval.Operation, tr approval.SupersedeTransition) {
		t.Helper()
		before, keys := f.hash(op), f.keys()
		if ok, err := f.st.Supersede(bg, op.Ref(), tr); err != nil || ok {
			t.Fatalf("%s: %v %v", name, ok, err)
		}
		f.unchanged(op, before)
		if f.keys() != keys {
			t.Fatalf("%s: a new version was stored", name)
		}
	}
	refused("draft", f.draft("agent", 10), f.edit(f.pending(), "grace", false, 2, f.now))
	p := f.pending()
	refused("past its window", p, f.edit(p, "grace", false, 2, p.ExpiresAt))
	f.approve(p, "grace")
	refused("editor decided before", p, f.edit(p, "grace", false, 2, f.now))

	// An edit without the editor's approval: a new pending version.
	p = f.pending()
	pendingBefore := f.usage("agent").Pending
	tr := f.edit(p, "ada", false, 2, f.now.Add(time.Second))
	if ok, err := f.st.Supersede(bg, p.Ref(), tr); err != nil || !ok {
		t.Fatalf("supersede: %v %v", ok, err)
	}
	old, next := f.get(p), f.get(tr.Next)
	if old.Status != approval.StatusSuperseded || old.SupersededBy != tr.Next.Key || old.Version != p.Version+1 {
		t.Fatalf("original after: %s by %q v%d", old.Status, old.SupersededBy, old.Version)
	}
	if next.Status != approval.StatusPending || next.PayloadHash != tr.Next.PayloadHash || string(next.Input) != `{"text":"edited"}` ||
		len(next.Approvals) != 0 || next.Supersedes != p.Key {
		t.Fatalf("new version: %s %s %s approvals %d supersedes %q", next.Status, next.PayloadHash, next.Input, len(next.Approvals), next.Supersedes)
	}
	if u := f.usage("agent"); u.Pending != pendingBefore {
		t.Fatalf("pending %d → %d: one ends, one begins", pendingBefore, u.Pending)
	}
	if got := f.eventNames(p); got != "prepared,sent,superseded" {
		t.Fatalf("original's events %s", got)
	}
	if got := f.eventNames(tr.Next); got != "prepared,sent" {
		t.Fatalf("new version's events %s", got)
	}
	// Its own retry reads as superseded and stores nothing more; another
	// edit of the superseded original is refused.
	before, keys := f.hash(p), f.keys()
	if ok, err := f.st.Supersede(bg, p.Ref(), tr); err != nil || !ok {
		t.Fatalf("retry: %v %v", ok, err)
	}
	f.unchanged(p, before)
	if f.keys() != keys || f.usage("agent").Pending != pendingBefore {
		t.Fatal("a retried supersede stored again")
	}
	refused("superseded before", p, f.edit(p, "ada", false, 2, f.now.Add(2*time.Second)))

	// With the editor's approval: one of two, or the quorum.
	for _, required := range []int{2, 1} {
		p := f.pending()
		tr := f.edit(p, "grace", true, required, f.now)
		if ok, err := f.st.Supersede(bg, p.Ref(), tr); err != nil || !ok {
			t.Fatalf("required %d: %v %v", required, ok, err)
		}
		next := f.get(tr.Next)
		want, waiting := approval.StatusPending, int64(0)
		if required == 1 {
			want, waiting = approval.StatusApproved, 1
		}
		if next.Status != want || len(next.Approvals) != 1 || next.Approvals[0].Approver != "grace" {
			t.Fatalf("required %d: %s approvals %+v", required, next.Status, next.Approvals)
		}
		if n := f.counter("agent", "nq"); n != waiting {
			t.Fatalf("required %d: approved waiting %d", required, n)
		}
		names := "prepared,sent,approval"
		if required == 1 {
			names += ",approved"
		}
		if got := f.eventNames(tr.Next); got != names {
			t.Fatalf("required %d: events %s", required, got)
		}
	}
}

// TestDecideScriptBranchesRetriedDecisions: a decision's retry (the same
// transition id) reads as its own outcome, never as another's.
func TestDecideScriptBranchesRetriedDecisions(t *testing.T) {
	f := newFixture(t)
	op := f.pending()
	rej := f.decision(op, "grace", false)
	for i := range 2 {
		if res, err := f.st.Decide(bg, op.Ref(), rej); err != nil || res.Outcome != approval.DecideRejected || res.Status != approval.StatusRejected {
			t.Fatalf("rejection, call %d: %+v %v", i+1, res, err)
		}
	}
	if got := f.eventNames(op); got != "prepared,sent,approval" { // the fixture names every decision so
		t.Fatalf("events %s", got)
	}
	// Another's decision on the rejected operation is not pending.
	if res, _ := f.st.Decide(bg, op.Ref(), f.decision(op, "ada", true)); res.Outcome != approval.DecideNotPending {
		t.Fatalf("ada after the rejection: %+v", res)
	}

	// A decision past the window expires the operation; its retry says it
	// is not pending (it was not rejected, nor approved).
	op = f.pending()
	late := f.decision(op, "grace", true)
	late.Now = op.ExpiresAt
	if res, err := f.st.Decide(bg, op.Ref(), late); err != nil || res.Outcome != approval.DecideExpired || res.Status != approval.StatusExpired {
		t.Fatalf("late decision: %+v %v", res, err)
	}
	if res, err := f.st.Decide(bg, op.Ref(), late); err != nil || res.Outcome != approval.DecideNotPending || res.Status != approval.StatusExpired {
		t.Fatalf("its retry: %+v %v", res, err)
	}
	if cur := f.get(op); len(cur.Approvals) != 0 || cur.Rejection != nil {
		t.Fatalf("after: approvals %d, rejection %v", len(cur.Approvals), cur.Rejection)
	}

	// A retried approval: recorded, then approved once the quorum is made.
	op = f.pending()
	first := f.decision(op, "grace", true)
	for range 2 {
		if res, _ := f.st.Decide(bg, op.Ref(), first); res.Outcome != approval.DecideRecorded {
			t.Fatalf("grace: %+v", res)
		}
	}
	second := f.decision(op, "ada", true)
	for range 2 {
		if res, _ := f.st.Decide(bg, op.Ref(), second); res.Outcome != approval.DecideApproved || res.Status != approval.StatusApproved {
			t.Fatalf("ada: %+v", res)
		}
	}
	if res, _ := f.st.Decide(bg, op.Ref(), first); res.Outcome != approval.DecideApproved {
		t.Fatalf("grace's retry after the quorum: %+v", res)
	}
}

// TestSettleScriptBranches: an operator's settlement of an executing
// operation, its retry (done, once), and a second settlement (refused).
func TestSettleScriptBranches(t *testing.T) {
	f := newFixture(t)
	if _, _, err := f.st.Settle(bg, nobody(), approval.SettleTransition{Step: step(f.now, "reconciled"), To: approval.StatusFailed}); code(err) != approval.CodeNotFound {
		t.Fatalf("missing: %v", err)
	}
	op := f.pending()
	before := f.hash(op)
	if st, moved, err := f.st.Settle(bg, op.Ref(), approval.SettleTransition{Step: step(f.now, "reconciled"), To: approval.StatusFailed}); err != nil || moved || st != approval.StatusPending {
		t.Fatalf("pending: %s %v %v", st, moved, err)
	}
	f.unchanged(op, before)
	f.approve(op, "grace")
	f.approve(op, "ada")
	if ok, _, err := f.st.Claim(bg, op.Ref(), claim(f.now, "dead")); err != nil || !ok {
		t.Fatal(ok, err)
	}
	s := approval.SettleTransition{Step: step(f.now, "reconciled"), To: approval.StatusFailed,
		Error: &approval.OpError{Code: approval.CodeExecutionFailed, Message: "settled by an operator"}}
	for i := range 2 {
		if st, moved, err := f.st.Settle(bg, op.Ref(), s); err != nil || !moved || st != approval.StatusExecuting {
			t.Fatalf("settle, call %d: %s %v %v", i+1, st, moved, err)
		}
	}
	cur := f.get(op)
	if cur.Status != approval.StatusFailed || cur.Error == nil || cur.Error.Message != "settled by an operator" {
		t.Fatalf("after: %s %+v", cur.Status, cur.Error)
	}
	if got := f.eventNames(op); !strings.HasSuffix(got, ",executing,reconciled") || strings.Count(got, "reconciled") != 1 {
		t.Fatalf("events %s", got)
	}
	before = f.hash(op)
	other := approval.SettleTransition{Step: step(f.now, "reconciled"), To: approval.StatusSucceeded}
	if st, moved, err := f.st.Settle(bg, op.Ref(), other); err != nil || moved || st != approval.StatusFailed {
		t.Fatalf("second settlement: %s %v %v", st, moved, err)
	}
	f.unchanged(op, before)
}
