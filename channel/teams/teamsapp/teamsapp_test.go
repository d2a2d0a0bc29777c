package teamsapp_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/faketeams"
)

func TestApproveInChatRunsAndUpdatesEveryCard(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}})
	op := e.prepareSend(t, "Your invoice", "Hello,\n**the invoice** is [attached](https://evil.example).\n")
	cards := e.cards(t, op.Key, 2)
	// One 1:1 card per approver; not to sam, whom the agent works for.
	g, a := cardOf(t, cards, grace.ID), cardOf(t, cards, strings.ToUpper(ada.AADObjectID))
	if len(cards) != 2 || !slices.Equal(faketeams.Verbs(&g.Card), []string{"approve", "reject"}) {
		t.Fatalf("cards %d, verbs %v", len(cards), faketeams.Verbs(&g.Card))
	}
	if text := faketeams.Text(&g.Card); !strings.Contains(text, "│ **the invoice** is [attached](https://evil.example).") ||
		!strings.Contains(text, "Your invoice") {
		t.Fatalf("the card does not show the exact text:\n%s", text)
	}
	if g.Summary != "Approval needed: email.send ("+approval.ShortHash(op.PayloadHash)+")" {
		t.Errorf("summary %q", g.Summary)
	}

	r := e.click(t, g, "approve", grace, "")
	if text := faketeams.Text(r.Card); !strings.Contains(text, "Your approval was recorded") || len(faketeams.Verbs(r.Card)) != 0 {
		t.Fatalf("grace's own card:\n%s", text)
	}
	done := e.waitStatus(t, op.Key, approval.StatusSucceeded)
	if len(done.Approvals) != 1 || done.Approvals[0].Approver != "grace" || done.Approvals[0].Via != "teams" ||
		done.Approvals[0].PayloadHash != op.PayloadHash {
		t.Fatalf("approvals %+v", done.Approvals)
	}
	if n := e.sentTo("client@client.example"); n != 1 {
		t.Fatalf("the email was sent %d times", n)
	}
	// Every card shows the outcome, without buttons.
	for _, c := range []faketeams.Activity{g, a} {
		cur := e.waitCard(t, c, "the card to show success", func(x faketeams.Activity) bool {
			return strings.Contains(faketeams.Text(&x.Card), "Done: it ran successfully")
		})
		if hasButtons(cur) || !strings.Contains(faketeams.Text(&cur.Card), "✅ Approved by Grace Park via teams") {
			t.Fatalf("card after success:\n%s", faketeams.Text(&cur.Card))
		}
	}
}

func TestChannelPostApprovedByEntraObjectID(t *testing.T) {
	const channel = "19:a1B2approvals@thread.tacv2"
	e := newEnv(t, opts{notify: []string{"teams:" + channel}, required: 2})
	op := e.prepareSend(t, "Quarterly numbers", "See attached.")
	cards := e.cards(t, op.Key, 1)
	if len(cards) != 1 || cards[0].Channel != channel || !strings.HasPrefix(cards[0].Conversation, channel+";messageid=") {
		t.Fatalf("posted %+v", cards)
	}
	e.click(t, cards[0], "approve", ada, "") // ada is known by her object id, in another case
	cur := e.waitCard(t, cards[0], "1 of 2 approvals", func(x faketeams.Activity) bool {
		return strings.Contains(faketeams.Text(&x.Card), "1 of 2 approvals") && hasButtons(x)
	})
	if !strings.Contains(faketeams.Text(&cur.Card), "Approved by Ada Lovelace") {
		t.Fatalf("card:\n%s", faketeams.Text(&cur.Card))
	}
	e.click(t, cur, "approve", grace, "")
	e.waitStatus(t, op.Key, approval.StatusSucceeded)
	e.waitCard(t, cards[0], "the post to show success", func(x faketeams.Activity) bool {
		return strings.Contains(faketeams.Text(&x.Card), "Done") && !hasButtons(x)
	})
}

// Anyone else gets a refreshed card only they see, saying why; nothing
// changes, and the card everyone sees is not touched.
func TestRefusedClicksChangeNothing(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams:19:general@thread.tacv2"}})
	op := e.prepareSend(t, "Hi", "Hello")
	card := e.cards(t, op.Key, 1)[0]
	otherTenant := e.fake.ClickOn(card, "approve", grace, "")
	otherTenant.TenantID = "99999999-9999-4999-8999-999999999999"
	mismatch := e.fake.ClickOn(card, "approve", grace, "")
	mismatch.Data["hash"] = "sha256:" + strings.Repeat("0", 64)
	bad := e.fake.ClickOn(card, "approve", grace, "")
	bad.Data = map[string]any{"op": 42}
	unknownOp := e.fake.ClickOn(card, "approve", grace, "")
	unknownOp.Data["op"] = "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	for _, tc := range []struct {
		name  string
		click faketeams.Click
		want  string
	}{
		{"stranger", e.fake.ClickOn(card, "approve", stranger, ""), "You are not an approver of this operation, so your click counts for nothing"},
		{"stranger rejects", e.fake.ClickOn(card, "reject", stranger, "no"), "You are not an approver"},
		{"on behalf of", e.fake.ClickOn(card, "approve", sam, ""), "You cannot approve an operation an agent prepared on your behalf"},
		{"approver elsewhere", e.fake.ClickOn(card, "approve", eve, ""), "You are not an approver of this operation. Nothing was recorded."},
		{"approver elsewhere rejects", e.fake.ClickOn(card, "reject", eve, "no"), "You are not an approver of this operation."},
		{"other tenant", otherTenant, "This Microsoft Teams organization is not the one countersign is set up for"},
		{"hash mismatch", mismatch, "its payload hash differs"},
		{"not a button", bad, "This button is not a valid countersign button"},
		{"unknown operation", unknownOp, "This operation no longer exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, e.fake.Invoke(target, tc.click, faketeams.Sign{}))
			if r.HTTPStatus != 200 || r.Card == nil || !strings.Contains(faketeams.Text(r.Card), tc.want) {
				t.Fatalf("HTTP %d, card:\n%s\nwant %q", r.HTTPStatus, faketeams.Text(r.Card), tc.want)
			}
		})
	}
	cur := e.get(t, op.Key)
	if cur.Status != approval.StatusPending || len(cur.Approvals) != 0 || cur.Rejection != nil {
		t.Fatalf("operation changed: %s %+v", cur.Status, cur.Approvals)
	}
	if a, _ := e.fake.Activity(card.Conversation, card.ID); a.Updates != 0 {
		t.Fatalf("the shared card was updated %d times", a.Updates)
	}
}

func TestRejectAsksForAReason(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}})
	op := e.prepareSend(t, "Refund", "Your refund is on its way.")
	g := cardOf(t, e.cards(t, op.Key, 2), grace.ID)
	if a := faketeams.FindAction(&g.Card, "reject"); a == nil || a.Style != "destructive" {
		t.Fatalf("reject action %+v", a)
	}
	r := e.click(t, g, "reject", grace, "   ")
	if !strings.Contains(faketeams.Text(r.Card), "Please say why") || e.get(t, op.Key).Status != approval.StatusPending {
		t.Fatalf("empty reason: %s", faketeams.Text(r.Card))
	}
	r = e.click(t, g, "reject", grace, "Wrong amount: it is 40, not 400.")
	if !strings.Contains(faketeams.Text(r.Card), "Your rejection was recorded") {
		t.Fatalf("card:\n%s", faketeams.Text(r.Card))
	}
	done := e.waitStatus(t, op.Key, approval.StatusRejected)
	if done.Rejection == nil || done.Rejection.Approver != "grace" || done.Rejection.Reason != "Wrong amount: it is 40, not 400." || done.Rejection.Via != "teams" {
		t.Fatalf("rejection %+v", done.Rejection)
	}
	e.waitCard(t, g, "the card to show the rejection", func(x faketeams.Activity) bool {
		text := faketeams.Text(&x.Card)
		return !hasButtons(x) && strings.Contains(text, "⛔ Rejected by Grace Park via teams") && strings.Contains(text, "Wrong amount")
	})
	// A second decision by the same person is explained, not recorded.
	r = e.click(t, g, "approve", grace, "")
	if !strings.Contains(faketeams.Text(r.Card), "You already rejected this operation") {
		t.Fatalf("card:\n%s", faketeams.Text(r.Card))
	}
	if n := e.sentTo("client@client.example"); n != 0 {
		t.Fatalf("a rejected email was sent %d times", n)
	}
}

// Concurrent clicks by two approvers, many times each: one approval
// counts, one execution.
func TestConcurrentClicksCountOnce(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}})
	op := e.prepareSend(t, "Once", "Exactly once.")
	cards := e.cards(t, op.Key, 2)
	g, a := cardOf(t, cards, grace.ID), cardOf(t, cards, strings.ToUpper(ada.AADObjectID))
	var wg sync.WaitGroup
	var mu sync.Mutex
	recorded := 0
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, u := g, grace
			if i%2 == 1 {
				c, u = a, ada
			}
			r := e.click(t, c, "approve", u, "")
			if strings.Contains(faketeams.Text(r.Card), "Your approval was recorded") {
				mu.Lock()
				recorded++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	done := e.waitStatus(t, op.Key, approval.StatusSucceeded)
	if recorded != 1 || len(done.Approvals) != 1 {
		t.Fatalf("%d clicks recorded, approvals %+v", recorded, done.Approvals)
	}
	time.Sleep(300 * time.Millisecond) // a second execution would be under way by now
	if n := e.sentTo("client@client.example"); n != 1 {
		t.Fatalf("sent %d times", n)
	}
}

func TestCanceledOperationUpdatesCards(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}})
	op := e.prepareSend(t, "Never mind", "…")
	g := cardOf(t, e.cards(t, op.Key, 2), grace.ID)
	if _, err := e.svc.Cancel(bg, e.agent, op.Key); err != nil {
		t.Fatal(err)
	}
	e.waitCard(t, g, "the card to show the cancelation", func(x faketeams.Activity) bool {
		return !hasButtons(x) && strings.Contains(faketeams.Text(&x.Card), "Canceled by the requester")
	})
	r := e.click(t, g, "approve", grace, "")
	if !strings.Contains(faketeams.Text(r.Card), "no longer waiting for decisions: it is canceled") {
		t.Fatalf("late click:\n%s", faketeams.Text(r.Card))
	}
}

// A replayed activity (same id) is answered with the card as it stands
// and handled once.
func TestReplayedActivityIsHandledOnce(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}, required: 2})
	op := e.prepareSend(t, "Twice?", "No.")
	g := cardOf(t, e.cards(t, op.Key, 2), grace.ID)
	c := e.fake.ClickOn(g, "reject", grace, "first reason")
	c.ID = "f:replayed-activity"
	first := e.do(t, e.fake.Invoke(target, c, faketeams.Sign{}))
	if !strings.Contains(faketeams.Text(first.Card), "Your rejection was recorded") {
		t.Fatalf("first: %s", first.Raw)
	}
	c.Data["reason"] = "second reason"
	again := e.do(t, e.fake.Invoke(target, c, faketeams.Sign{}))
	if text := faketeams.Text(again.Card); again.HTTPStatus != 200 || strings.Contains(text, "recorded") || strings.Contains(text, "already") {
		t.Fatalf("replay answered:\n%s", text)
	}
	if r := e.get(t, op.Key).Rejection; r == nil || r.Reason != "first reason" {
		t.Fatalf("rejection %+v", r)
	}
}

// A refused click of someone who is not an approver of the operation it
// names answers with the reason only: none of the operation's content
// (subject, text, recipients, hash) reaches them. An approver's own
// refusal still shows them the card.
func TestRefusalShowsNoContentToNonApprovers(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams:19:general@thread.tacv2"}})
	op := e.prepareSend(t, "Merger terms draft", "The board accepts 41.7 per share.")
	card := e.cards(t, op.Key, 1)[0]
	otherTenant := e.fake.ClickOn(card, "approve", grace, "")
	otherTenant.TenantID = "99999999-9999-4999-8999-999999999999"
	secret := []string{"Merger terms", "41.7 per share", "client@client.example", approval.ShortHash(op.PayloadHash)}
	for _, tc := range []struct {
		name  string
		click faketeams.Click
	}{
		{"stranger", e.fake.ClickOn(card, "approve", stranger, "")},
		{"stranger rejects without a reason", e.fake.ClickOn(card, "reject", stranger, "")},
		{"stranger reviews", e.fake.ClickOn(card, "review", stranger, "")},
		{"approver of other routes", e.fake.ClickOn(card, "approve", eve, "")},
		{"approver of other routes rejects", e.fake.ClickOn(card, "reject", eve, "")},
		{"on behalf of", e.fake.ClickOn(card, "approve", sam, "")},
		{"other tenant", otherTenant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, e.fake.Invoke(target, tc.click, faketeams.Sign{}))
			text := faketeams.Text(r.Card)
			if r.HTTPStatus != 200 || r.Card == nil || !strings.Contains(text, "Nothing was recorded") {
				t.Fatalf("HTTP %d, card:\n%s", r.HTTPStatus, text)
			}
			for _, s := range secret {
				if strings.Contains(text, s) {
					t.Fatalf("the refusal shows %q of the operation:\n%s", s, text)
				}
			}
		})
	}
	mismatch := e.fake.ClickOn(card, "approve", grace, "")
	mismatch.Data["hash"] = "sha256:" + strings.Repeat("0", 64)
	r := e.do(t, e.fake.Invoke(target, mismatch, faketeams.Sign{}))
	if text := faketeams.Text(r.Card); !strings.Contains(text, "its payload hash differs") || !strings.Contains(text, "Merger terms") {
		t.Fatalf("an approver's refusal should show them the card:\n%s", text)
	}
}
