package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

var bg = context.Background()

func TestLoopApproveExecutesOnce(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 2)
	op := h.prepare(t, 7)
	if got, want := op.Status, approval.StatusDraft; got != want {
		t.Fatalf("status = %s, want %s", got, want)
	}
	if !strings.HasPrefix(op.PayloadHash, "sha256:") || len(op.PayloadHash) != 71 {
		t.Fatalf("payload hash %q", op.PayloadHash)
	}
	h.send(t, op.Key)
	link := h.inbox.link(t, "grace")

	// Opening the link decides nothing, however often.
	for range 3 {
		v, err := h.svc.OpenLink(bg, link)
		if err != nil || v.Problem != approval.LinkOK {
			t.Fatalf("open: %v %v", v.Problem, err)
		}
	}
	if cur, _ := h.svc.Get(bg, h.agent, op.Key); cur.Status != approval.StatusPending {
		t.Fatalf("status after opening = %s", cur.Status)
	}

	v, res, err := h.svc.DecideByLink(bg, link, true, "")
	if err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("decide: %v %v %v", v.Problem, res, err)
	}
	done := h.waitStatus(t, op.Key, approval.StatusSucceeded)
	if got, want := h.effect.runs.Load(), int32(1); got != want {
		t.Fatalf("runs = %d, want %d", got, want)
	}
	if got, want := string(h.effect.seen[0]), string(op.Input); got != want {
		t.Fatalf("executed input %s, want the stored %s", got, want)
	}
	if got, want := string(done.Result), `{"ok":true}`; got != want {
		t.Fatalf("result = %s, want %s", got, want)
	}

	// The link is now used.
	if v, _ := h.svc.OpenLink(bg, link); v.Problem != approval.LinkUsed {
		t.Fatalf("reopen problem = %q, want used", v.Problem)
	}
	// The notice's delivery is recorded by its job, which may end after
	// the execution did: the human can be quick.
	var evs []approval.Event
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if evs, err = h.svc.Events(bg, h.agent, op.Key); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(evs, func(e approval.Event) bool { return e.Event == "notified" }) || time.Now().After(deadline) {
			break
		}
	}
	var names []string
	notified := 0
	for _, e := range evs {
		if e.Event == "notified" {
			notified++ // may land before or after the decision: the human can be quick
			continue
		}
		names = append(names, e.Event)
		if e.PayloadHash != op.PayloadHash {
			t.Errorf("event %s payload hash %s", e.Event, e.PayloadHash)
		}
		if e.Event == "approval" && (e.Actor != "approver:grace" || e.Channel != "console") {
			t.Errorf("approval event actor %s via %s", e.Actor, e.Channel)
		}
	}
	if got, want := strings.Join(names, ","), "prepared,sent,approval,approved,executing,succeeded"; got != want || notified != 1 {
		t.Errorf("events = %s (+%d notified), want %s (+1)", got, notified, want)
	}
}

func TestIdempotencyKey(t *testing.T) {
	h := newHarness(t, opts{})
	call := approval.PrepareCall{Action: "test.effect", Input: json.RawMessage(`{"n":1}`), IdempotencyKey: "k-1"}
	a, created, err := h.svc.Prepare(bg, h.agent, call)
	if err != nil || !created {
		t.Fatalf("first: %v %v", created, err)
	}
	// Same request, different key order and spacing: same operation.
	call.Input = json.RawMessage(`{ "note": "", "n": 1 }`)
	b, created, err := h.svc.Prepare(bg, h.agent, call)
	if err != nil || created || b.Key != a.Key {
		t.Fatalf("repeat: %v %v %s vs %s", created, err, b.Key, a.Key)
	}
	call.Input = json.RawMessage(`{"n":2}`)
	if _, _, err := h.svc.Prepare(bg, h.agent, call); approval.ErrorCode(err) != approval.CodeIdempotencyKeyReused {
		t.Fatalf("different request: %v", err)
	}
}

func TestConcurrentPrepareSameIdempotencyKey(t *testing.T) {
	h := newHarness(t, opts{})
	var wg sync.WaitGroup
	keys := make(chan string, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: json.RawMessage(`{"n":3}`), IdempotencyKey: "same"})
			if err != nil {
				t.Error(err)
				return
			}
			keys <- op.Key
		}()
	}
	wg.Wait()
	close(keys)
	seen := map[string]bool{}
	for k := range keys {
		seen[k] = true
	}
	if len(seen) != 1 {
		t.Fatalf("%d operations for one idempotency key", len(seen))
	}
}

func TestQuorumOfDistinctApprovers(t *testing.T) {
	h := newHarness(t, opts{required: 2, approvers: []string{"grace", "ada"}})
	h.run(t, 1)
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	g, a := h.inbox.link(t, "grace"), h.inbox.link(t, "ada")

	if _, res, err := h.svc.DecideByLink(bg, g, true, ""); err != nil || res.Outcome != approval.DecideRecorded {
		t.Fatalf("first approval: %v %v", res, err)
	}
	// The same approver again, through the same link or through Slack, counts once.
	if v, _, _ := h.svc.DecideByLink(bg, g, true, ""); v.Problem != approval.LinkUsed {
		t.Fatalf("repeat link: %q", v.Problem)
	}
	if _, res, err := h.svc.DecideAs(bg, op.Key, "grace", "slack", op.PayloadHash, true, ""); err != nil || res.Outcome != approval.DecideAlreadyDecided {
		t.Fatalf("repeat via slack: %v %v", res, err)
	}
	if cur, _ := h.svc.Get(bg, h.agent, op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 1 {
		t.Fatalf("after one approval: %s with %d approvals", cur.Status, len(cur.Approvals))
	}
	if _, res, err := h.svc.DecideByLink(bg, a, true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("second approval: %v %v", res, err)
	}
	done := h.waitStatus(t, op.Key, approval.StatusSucceeded)
	if len(done.Approvals) != 2 || h.effect.runs.Load() != 1 {
		t.Fatalf("approvals %d runs %d", len(done.Approvals), h.effect.runs.Load())
	}
}

func TestRejectionReasonReachesAgent(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 1)
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	link := h.inbox.link(t, "grace")
	if _, res, err := h.svc.DecideByLink(bg, link, false, "  wrong client, use the Acme address  "); err != nil || res.Outcome != approval.DecideRejected {
		t.Fatalf("reject: %v %v", res, err)
	}
	cur, _ := h.svc.Get(bg, h.agent, op.Key)
	if cur.Status != approval.StatusRejected || cur.Rejection == nil || cur.Rejection.Reason != "wrong client, use the Acme address" {
		t.Fatalf("status %s rejection %+v", cur.Status, cur.Rejection)
	}
	if _, err := h.svc.Send(bg, h.agent, op.Key); approval.ErrorCode(err) != approval.CodeInvalidState {
		t.Fatalf("send after rejection: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if h.effect.runs.Load() != 0 {
		t.Fatal("a rejected operation ran")
	}
}

func TestSelfApprovalForbidden(t *testing.T) {
	h := newHarness(t, opts{approvers: []string{"grace", "sam"}, forbidSelf: true})
	op := h.prepare(t, 1)
	if got := op.Route.Approvers; len(got) != 1 || got[0] != "grace" {
		t.Fatalf("approvers = %v, want the on-behalf-of human left out", got)
	}
	h.send(t, op.Key)
	_, _, err := h.svc.DecideAs(bg, op.Key, "sam", "slack", op.PayloadHash, true, "")
	if _, ok := err.(*approval.Refusal); !ok {
		t.Fatalf("self approval: %v", err)
	}
	if cur, _ := h.svc.Get(bg, h.agent, op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 {
		t.Fatalf("self approval changed the operation: %s", cur.Status)
	}
}

func TestExpiryKeepsStatesDistinct(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 1)
	draft := h.prepare(t, 1)
	pending := h.prepare(t, 2)
	h.send(t, pending.Key)
	rejected := h.prepare(t, 3)
	h.send(t, rejected.Key)
	canceled := h.prepare(t, 4)
	h.inbox.link(t, "grace")
	for _, n := range h.inbox.notices {
		_ = n
	}
	if _, _, err := h.svc.DecideAs(bg, rejected.Key, "grace", "slack", rejected.PayloadHash, false, "no"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Cancel(bg, h.agent, canceled.Key); err != nil {
		t.Fatal(err)
	}

	h.clock.Add(16 * time.Minute) // past the draft TTL, within the approval window
	if cur, _ := h.svc.Get(bg, h.agent, draft.Key); cur.Status != approval.StatusExpired {
		t.Fatalf("draft after ttl: %s", cur.Status)
	}
	if _, err := h.svc.Send(bg, h.agent, draft.Key); approval.ErrorCode(err) != approval.CodeInvalidState {
		t.Fatalf("send expired draft: %v", err)
	}
	if cur, _ := h.svc.Get(bg, h.agent, pending.Key); cur.Status != approval.StatusPending {
		t.Fatalf("pending within window: %s", cur.Status)
	}
	h.clock.Add(time.Hour)
	want := map[string]approval.Status{draft.Key: approval.StatusExpired, pending.Key: approval.StatusExpired,
		rejected.Key: approval.StatusRejected, canceled.Key: approval.StatusCanceled}
	for k, w := range want {
		if cur, _ := h.svc.Get(bg, h.agent, k); cur.Status != w {
			t.Errorf("%s = %s, want %s", k, cur.Status, w)
		}
	}
	// An expired operation cannot be approved, and the attempt uses nothing.
	if _, res, _ := h.svc.DecideAs(bg, pending.Key, "grace", "slack", pending.PayloadHash, true, ""); res.Outcome != approval.DecideNotPending {
		t.Fatalf("decide after expiry: %v", res)
	}
	if h.effect.runs.Load() != 0 {
		t.Fatal("something ran")
	}
}

func TestKillSwitchKeepsApprovedWaiting(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 1)
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	link := h.inbox.link(t, "grace")
	h.writes.Store(false)
	if _, err := h.svc.Send(bg, h.agent, h.prepare(t, 9).Key); approval.ErrorCode(err) != approval.CodeWritesDisabled {
		t.Fatalf("send with writes off: %v", err)
	}
	if _, res, err := h.svc.DecideByLink(bg, link, true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("decide: %v %v", res, err)
	}
	time.Sleep(300 * time.Millisecond) // several writes-off retries
	if cur, _ := h.svc.Get(bg, h.agent, op.Key); cur.Status != approval.StatusApproved || h.effect.runs.Load() != 0 {
		t.Fatalf("with writes off: %s, runs %d", cur.Status, h.effect.runs.Load())
	}
	h.writes.Store(true)
	h.waitStatus(t, op.Key, approval.StatusSucceeded)
	if h.effect.runs.Load() != 1 {
		t.Fatalf("runs = %d", h.effect.runs.Load())
	}
}

func TestConcurrentDecisionsExecuteOnce(t *testing.T) {
	h := newHarness(t, opts{})
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	// Deliver without workers so that the decisions race the claim below.
	if err := h.svc.Reconcile(bg, op.Ref()); err != nil {
		t.Fatal(err)
	}
	link := h.inbox.link(t, "grace")
	var wg sync.WaitGroup
	outcomes := make(chan approval.DecideOutcome, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, res, err := h.svc.DecideByLink(bg, link, true, "")
			if err != nil {
				t.Error(err)
			}
			outcomes <- res.Outcome
			// Every decider also tries to run the operation.
			if err := h.svc.Reconcile(bg, op.Ref()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(outcomes)
	approved := 0
	for o := range outcomes {
		if o == approval.DecideApproved {
			approved++
		}
	}
	if approved != 1 {
		t.Fatalf("%d decisions reached quorum, want 1", approved)
	}
	if got := h.effect.runs.Load(); got != 1 {
		t.Fatalf("runs = %d, want 1", got)
	}
	if cur, _ := h.svc.Get(bg, h.agent, op.Key); cur.Status != approval.StatusSucceeded {
		t.Fatalf("status %s", cur.Status)
	}
}

func TestTamperedLinksUseNothing(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 1)
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	link := h.inbox.link(t, "grace")
	parts := strings.Split(link, ".")
	other := h.prepare(t, 2)
	h.send(t, other.Key)
	bad := map[string]string{
		"garbage":       "not-a-link",
		"unknown kid":   "zz." + parts[1] + "." + parts[2],
		"bad signature": parts[0] + "." + parts[1] + ".AAAA" + parts[2][4:],
		"claims edited": parts[0] + "." + parts[1][:len(parts[1])-2] + "AA." + parts[2],
		"empty":         "",
	}
	for name, tok := range bad {
		t.Run(name, func(t *testing.T) {
			v, _, err := h.svc.DecideByLink(bg, tok, true, "")
			if err != nil || v.Problem != approval.LinkUnknown {
				t.Fatalf("problem %q err %v", v.Problem, err)
			}
		})
	}
	if cur, _ := h.svc.Get(bg, h.agent, op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 {
		t.Fatalf("tampering changed the operation: %s", cur.Status)
	}
	// The real link still works.
	if _, res, err := h.svc.DecideByLink(bg, link, true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("real link: %v %v", res, err)
	}
}

func TestNotificationRetriedAfterFailure(t *testing.T) {
	h := newHarness(t, opts{})
	h.run(t, 1)
	h.inbox.failN.Store(1)
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	h.inbox.link(t, "grace") // arrives after the backoff (2 s)
	if got := h.inbox.count(); got != 1 {
		t.Fatalf("%d notices, want 1", got)
	}
}

func TestApprovedButExpiredSaysWhy(t *testing.T) {
	h := newHarness(t, opts{})
	op := h.prepare(t, 1)
	h.send(t, op.Key)
	h.writes.Store(false)
	if _, res, err := h.svc.DecideAs(bg, op.Key, "grace", "slack", op.PayloadHash, true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatal(res, err)
	}
	h.clock.Add(2 * time.Hour)
	cur, _ := h.svc.Get(bg, h.agent, op.Key)
	m := approval.BuildMessage(cur, h.svc.Policy(), h.clock.Now())
	if cur.Status != approval.StatusExpired || !strings.Contains(m.Outcome, "could not run") {
		t.Fatalf("%s: %q", cur.Status, m.Outcome)
	}
	if h.effect.runs.Load() != 0 {
		t.Fatal("ran after its window")
	}
}

// One principal holds at most MaxWaits long-polls open at once: the next
// is refused with rate_limited at once instead of holding a connection
// and a goroutine for its whole wait, and a place freed is usable again.
func TestLongPollsPerPrincipalAreBounded(t *testing.T) {
	h := newHarness(t, opts{})
	op := h.send(t, h.prepare(t, 1).Key)
	var wg sync.WaitGroup
	for range approval.MaxWaits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.svc.Wait(context.Background(), h.agent, op.Key, time.Hour); err != nil {
				t.Errorf("wait: %v", err)
			}
		}()
	}
	for h.svc.Waiting(h.agent.ID) < approval.MaxWaits {
		time.Sleep(time.Millisecond)
	}
	// Unbounded, this would wait for its whole 2 s and then answer.
	_, err := h.svc.Wait(context.Background(), h.agent, op.Key, 2*time.Second)
	var e *approval.Error
	if !errors.As(err, &e) || e.Code != approval.CodeRateLimited || e.Details["retry_after_seconds"] == nil {
		t.Fatalf("wait past the bound: %v", err)
	}
	// Reading without waiting is not bounded by it.
	if _, err := h.svc.Wait(context.Background(), h.agent, op.Key, 0); err != nil {
		t.Fatalf("a read without wait: %v", err)
	}
	h.svc.Close() // ends every long-poll
	wg.Wait()
	if n := h.svc.Waiting(h.agent.ID); n != 0 {
		t.Fatalf("%d places still held after the waits returned", n)
	}
	got, err := h.svc.Wait(context.Background(), h.agent, op.Key, time.Millisecond)
	if err != nil || got.Key != op.Key {
		t.Fatalf("a wait after the others returned: %v", err)
	}
}

// Guarantee 10 for what humans read: each hidden character is shown as an
// escape of 12 bytes, so an input made of them would be rendered many
// times its size in every channel. Past a bound it is refused and nothing
// is stored; text with some of them (Persian prose uses U+200C between
// letters) is prepared as usual.
func TestInputOfHiddenCharactersIsRefused(t *testing.T) {
	h := newHarness(t, opts{})
	for name, note := range map[string]string{
		"DEL":              strings.Repeat("\x7f", 100_000),
		"zero-width space": strings.Repeat("\u200b", 40_000),
		"alternating":      strings.Repeat("a\u0085", 50_000),
	} {
		b, _ := json.Marshal(map[string]any{"n": 1, "note": note})
		_, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: b})
		var e *approval.Error
		if !errors.As(err, &e) || e.Code != approval.CodeInvalidInput || !strings.Contains(e.Message, "invisible or control characters") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if ops, err := h.svc.List(bg, h.agent, ""); err != nil || len(ops) != 0 {
		t.Fatalf("refused inputs stored %d operations (%v)", len(ops), err)
	}
	prose := strings.Repeat("می\u200cخواهم این را بفرستم. ", 2000)
	b, _ := json.Marshal(map[string]any{"n": 1, "note": prose})
	if _, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: b}); err != nil {
		t.Fatalf("prose with ZWNJ: %v", err)
	}
}

// A list answers a request of a few bytes: it stops once the inputs it
// carries reach MaxListInputBytes (each operation comes with its input and
// a preview of about its size), newest first, and always lists the newest.
func TestListIsBoundedByTheInputsItCarries(t *testing.T) {
	h := newHarness(t, opts{})
	note := strings.Repeat("x", 200_000)
	var keys []string
	for i := range 10 {
		b, _ := json.Marshal(map[string]any{"n": i, "note": note})
		op, _, err := h.svc.Prepare(bg, h.agent, approval.PrepareCall{Action: "test.effect", Input: b})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, op.Key)
		h.clock.Add(time.Millisecond)
	}
	ops, err := h.svc.List(bg, h.agent, "")
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, op := range ops {
		size += len(op.Input)
	}
	if len(ops) == 0 || len(ops) == 10 || size > approval.MaxListInputBytes {
		t.Fatalf("listed %d operations, %d bytes of input", len(ops), size)
	}
	if ops[0].Key != keys[9] {
		t.Fatalf("the newest is not listed first: %s", ops[0].Key)
	}
	// A small operation is listed as before.
	small := h.prepare(t, 1)
	if ops, _ := h.svc.List(bg, h.agent, approval.StatusDraft); len(ops) == 0 || ops[0].Key != small.Key {
		t.Fatalf("the newest small operation is not listed")
	}
}
