package approval_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
)

func remindingRoute(r *approval.RouteRule) {
	r.ApprovalTTL = 2 * time.Hour
	r.Remind = []time.Duration{30 * time.Minute, 45 * time.Minute}
	r.Escalate = &approval.EscalateRule{After: time.Hour, ApproverIDs: []string{"ada"}}
}

// notices returns the links an approver received, oldest first, and
// whether each was a reminder.
func (b *inbox) linksOf(approver string) (links []string, reminders []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.notices {
		if n.Approver != nil && n.Approver.ID == approver && n.Link != "" {
			links = append(links, tokenOf(n.Link))
			r := 0
			if n.FollowUp != nil {
				r = n.FollowUp.Reminder
			}
			reminders = append(reminders, r)
		}
	}
	return links, reminders
}

// waitNotices waits until approver has received n notices.
func (h *harness) waitNotices(t *testing.T, approver string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		links, _ := h.inbox.linksOf(approver)
		if len(links) >= n {
			return links
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d notices, want %d", approver, len(links), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRemindersAndEscalation(t *testing.T) {
	h := newHarness(t, opts{route: remindingRoute})
	h.run(t, 2)
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	first := h.waitNotices(t, "grace", 1)[0]

	// 31 minutes later: one reminder to grace, with a new link that
	// replaces the first (never two live links per approver and channel).
	h.clock.Add(31 * time.Minute)
	links := h.waitNotices(t, "grace", 2)
	if _, rem := h.inbox.linksOf("grace"); rem[1] != 1 {
		t.Fatalf("the second notice is not reminder 1: %v", rem)
	}
	if v, _ := h.svc.OpenLink(bg, first); v.Problem != approval.LinkReplaced {
		t.Fatalf("the first link after the reminder: %q", v.Problem)
	}
	if _, res, _ := h.svc.DecideByLink(bg, first, true, ""); res.Outcome != "" {
		t.Fatalf("the replaced link decided: %v", res)
	}
	if v, _ := h.svc.OpenLink(bg, links[1]); v.Problem != approval.LinkOK {
		t.Fatalf("the reminder's link: %q", v.Problem)
	}
	cur, _ := h.svc.Get(bg, h.agent, op.Key)
	if v := approval.AgentView(cur, h.clock.Now()); len(v.Approval.Reminded) != 1 || v.Approval.Escalated != nil {
		t.Fatalf("agent view: reminded %v, escalated %v", v.Approval.Reminded, v.Approval.Escalated)
	}

	// At 46 minutes the second reminder; after the hour ada is added, once,
	// and may approve. The steps are apart so that no reminder can follow
	// ada's first notice and replace the link she uses.
	h.clock.Add(15 * time.Minute)
	h.waitNotices(t, "grace", 3)
	h.clock.Add(16 * time.Minute)
	ada := h.waitNotices(t, "ada", 1)
	cur, _ = h.svc.Get(bg, h.agent, op.Key)
	if cur.Escalated == nil || len(cur.Escalated.Approvers) != 1 || !cur.HasApprover("ada") {
		t.Fatalf("escalated = %+v", cur.Escalated)
	}
	if _, res, err := h.svc.DecideByLink(bg, ada[0], true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("ada approves: %v %v", res, err)
	}
	h.waitStatus(t, op.Key, approval.StatusSucceeded)

	// Decided: no more reminders, however late it gets.
	before := h.inbox.count()
	h.clock.Add(40 * time.Minute)
	time.Sleep(300 * time.Millisecond)
	if after := h.inbox.count(); after != before {
		t.Fatalf("%d notices after the decision", after-before)
	}
	evs, _ := h.svc.Events(bg, h.agent, op.Key)
	count := map[string]int{}
	for _, e := range evs {
		count[e.Event]++
	}
	if count["reminded"] != 2 || count["escalated"] != 1 {
		t.Fatalf("events: %v", count)
	}
}

// A reminder goes only to those who have not decided.
func TestReminderSkipsWhoDecided(t *testing.T) {
	h := newHarness(t, opts{required: 2, approvers: []string{"grace", "ada"}, route: func(r *approval.RouteRule) {
		r.ApprovalTTL = 2 * time.Hour
		r.Remind = []time.Duration{30 * time.Minute}
	}})
	h.run(t, 2)
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	g := h.waitNotices(t, "grace", 1)
	h.waitNotices(t, "ada", 1)
	if _, res, _ := h.svc.DecideByLink(bg, g[0], true, ""); res.Outcome != approval.DecideRecorded {
		t.Fatal(res)
	}
	h.clock.Add(31 * time.Minute)
	h.waitNotices(t, "ada", 2)
	time.Sleep(200 * time.Millisecond)
	if links, _ := h.inbox.linksOf("grace"); len(links) != 1 {
		t.Fatalf("grace, who approved, got %d notices", len(links))
	}
}

// Two replicas wake for the same escalation: the approvers are added and
// notified once.
func TestEscalationOnceAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	a := newHarnessOn(t, srv.Client(t), opts{route: remindingRoute})
	b := newHarnessOn(t, srv.Client(t), opts{route: remindingRoute, share: a})
	a.run(t, 2)
	b.run(t, 2)
	op := a.prepare(t, 1)
	a.send(t, op.Key)
	a.waitNotices(t, "grace", 1)
	a.clock.Add(61 * time.Minute)
	a.waitNotices(t, "ada", 1)
	time.Sleep(500 * time.Millisecond)
	if links, _ := a.inbox.linksOf("ada"); len(links) != 1 {
		t.Fatalf("ada notified %d times", len(links))
	}
	cur, _ := a.store.Get(bg, op.Ref())
	evs, _ := a.store.Events(bg, op.Ref())
	n := 0
	for _, e := range evs {
		if e.Event == "escalated" {
			n++
		}
	}
	if n != 1 || cur.Escalated == nil {
		t.Fatalf("%d escalated events", n)
	}
}
