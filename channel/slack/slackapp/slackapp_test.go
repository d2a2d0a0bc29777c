package slackapp_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/slack/slackapp"
	"github.com/countersign/countersign/internal/testing/fakeslack"
	"github.com/slack-go/slack"
)

func hasButtons(m fakeslack.Message) bool {
	return m.Button("approve") != nil || m.Button("reject") != nil
}

func TestAuthorizedClickExecutesAndUpdatesMessage(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "Deploy *v2* is live")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	if got, want := msg.Channel, e.fake.ChannelID("#approvals"); got != want {
		t.Fatalf("posted in %s, want %s", got, want)
	}
	if !hasButtons(msg) || !strings.Contains(msg.AllText(), "Deploy *v2* is live") {
		t.Fatalf("approval message:\n%s", msg.AllText())
	}

	e.click(t, grace, slackapp.ActionApprove, msg)
	done := e.waitStatus(t, op.Key, approval.StatusSucceeded)
	if len(done.Approvals) != 1 || done.Approvals[0].Approver != "grace" || done.Approvals[0].Via != "slack" ||
		done.Approvals[0].PayloadHash != op.PayloadHash {
		t.Fatalf("approvals = %+v", done.Approvals)
	}
	// The action posted the exact message, once.
	posted := e.fake.Messages(e.fake.ChannelID("#general"))
	if len(posted) != 1 || posted[0].Text != "Deploy *v2* is live" || posted[0].Metadata.EventPayload["operation_key"] != op.Key {
		t.Fatalf("posted = %+v", posted)
	}
	var r slackpost.Result
	if err := json.Unmarshal(done.Result, &r); err != nil || r.TS != posted[0].TS {
		t.Fatalf("result %s", done.Result)
	}
	// The approval message now shows the outcome, without buttons.
	cur := e.waitMessage(t, msg, "the message to show success", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "Done: it ran successfully")
	})
	if hasButtons(cur) {
		t.Fatalf("buttons left:\n%s", cur.RawBlocks)
	}
	if !strings.Contains(cur.AllText(), "Approved by *Grace Park* via slack") {
		t.Fatalf("who decided is not shown:\n%s", cur.AllText())
	}
	if n := len(e.fake.Ephemerals("")); n != 0 {
		t.Fatalf("%d ephemeral messages for an accepted click", n)
	}
}

func TestStrangerClickIsRefused(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	for _, tc := range []struct{ user, want string }{
		{stranger, "You are not an approver"},
		{eve, "you are not an approver of this operation"}, // configured, but not on this route
	} {
		e.click(t, tc.user, slackapp.ActionApprove, msg)
		got := e.ephemeral(t, tc.user, "Nothing was recorded")
		if !strings.Contains(strings.ToLower(got.Text), strings.ToLower(tc.want)) || got.Channel != msg.Channel {
			t.Errorf("%s was told %+v", tc.user, got)
		}
		e.click(t, tc.user, slackapp.ActionReject, msg)
	}
	e.fake.Wait(t, 5*time.Second, "four refusals", func() bool { return len(e.fake.Ephemerals("")) == 4 })
	cur := e.get(t, op.Key)
	if cur.Status != approval.StatusPending || len(cur.Approvals) != 0 || cur.Rejection != nil {
		t.Fatalf("operation changed: %s %+v", cur.Status, cur.Approvals)
	}
	if m := e.message(t, msg); m.Updates != 0 || !hasButtons(m) {
		t.Fatalf("message changed: %+v", m)
	}
	if n := e.fake.Count("views.open"); n != 0 {
		t.Fatalf("a stranger got the reject modal (%d)", n)
	}
}

func TestSelfApprovalIsRefused(t *testing.T) {
	e := newEnv(t, opts{forbidSelf: true})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	e.click(t, sam, slackapp.ActionApprove, msg)
	got := e.ephemeral(t, sam, "on your behalf")
	if !strings.Contains(got.Text, "Nothing was recorded") {
		t.Fatalf("sam was told %q", got.Text)
	}
	e.click(t, sam, slackapp.ActionReject, msg)
	e.fake.Wait(t, 5*time.Second, "two refusals", func() bool { return len(e.fake.Ephemerals(sam)) == 2 })
	if cur := e.get(t, op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 || cur.Rejection != nil {
		t.Fatalf("operation changed: %s", cur.Status)
	}
	if e.fake.Count("views.open") != 0 || e.message(t, msg).Updates != 0 {
		t.Fatal("something changed")
	}
}

func TestBadSignaturesAreRefused(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	body := clickRequest(grace, slackapp.ActionApprove, msg, nil)
	altered := []byte(strings.Replace(string(body), "U0GRACE", "U0GRACF", 1))
	for _, tc := range []struct {
		name string
		req  *http.Request
	}{
		{"wrong secret", fakeslack.SignedRequest("http://x/slack/interactions", "not-the-secret", time.Now(), body)},
		{"old timestamp", fakeslack.SignedRequest("http://x/slack/interactions", secret, time.Now().Add(-6*time.Minute), body)},
		{"future timestamp", fakeslack.SignedRequest("http://x/slack/interactions", secret, time.Now().Add(6*time.Minute), body)},
		{"altered body", func() *http.Request {
			r := fakeslack.SignedRequest("http://x/slack/interactions", secret, time.Now(), altered)
			fakeslack.SignHeaders(r.Header, secret, time.Now(), body) // signature of the original
			return r
		}()},
		{"no signature", func() *http.Request {
			r := fakeslack.SignedRequest("http://x/slack/interactions", secret, time.Now(), body)
			r.Header.Del("X-Slack-Signature")
			return r
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, resp := e.do(t, tc.req)
			if st != http.StatusUnauthorized || !strings.Contains(resp, "unauthenticated") {
				t.Fatalf("status %d %s, want 401", st, resp)
			}
		})
	}
	if cur := e.get(t, op.Key); len(cur.Approvals) != 0 || cur.Status != approval.StatusPending {
		t.Fatalf("operation changed: %s", cur.Status)
	}
	if n := len(e.fake.Calls("chat.postEphemeral", "views.open")); n != 0 {
		t.Fatalf("%d Slack calls for refused requests", n)
	}
}

func TestReplayedPayloadCountsOnce(t *testing.T) {
	e := newEnv(t, opts{required: 2})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	body := clickRequest(grace, slackapp.ActionApprove, msg, nil)
	at := time.Now()
	for range 3 {
		if st, resp := e.post(t, body, at, secret); st != 200 {
			t.Fatalf("status %d %s", st, resp)
		}
	}
	// The same request with the signature spelled in upper case (it still
	// verifies) is the same request.
	req := fakeslack.SignedRequest("http://countersign.test/slack/interactions", secret, at, body)
	req.Header.Set("X-Slack-Signature", "v0="+strings.ToUpper(strings.TrimPrefix(req.Header.Get("X-Slack-Signature"), "v0=")))
	if st, resp := e.do(t, req); st != 200 {
		t.Fatalf("status %d %s", st, resp)
	}
	cur := e.get(t, op.Key)
	if len(cur.Approvals) != 1 || cur.Status != approval.StatusPending {
		t.Fatalf("approvals = %+v (%s)", cur.Approvals, cur.Status)
	}
	// Replays are ignored silently; a new click by the same person is a
	// repeat decision and is explained.
	time.Sleep(100 * time.Millisecond)
	if n := len(e.fake.Ephemerals("")); n != 0 {
		t.Fatalf("replays produced %d ephemeral messages", n)
	}
	e.click(t, grace, slackapp.ActionApprove, msg)
	got := e.ephemeral(t, grace, "already approved")
	if !strings.Contains(got.Text, "via slack") {
		t.Fatalf("grace was told %q", got.Text)
	}
	if cur := e.get(t, op.Key); len(cur.Approvals) != 1 {
		t.Fatalf("approvals = %d", len(cur.Approvals))
	}
	var decisions int
	evs, _ := e.svc.Events(bg, e.agent, op.Key)
	for _, ev := range evs {
		if ev.Event == "approval" {
			decisions++
		}
	}
	if decisions != 1 {
		t.Fatalf("%d approval events", decisions)
	}
}

func TestHashMismatchIsRefused(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	forged, _ := json.Marshal(map[string]string{"op": op.Key, "hash": "sha256:" + strings.Repeat("0", 64)})
	body := clickRequest(grace, slackapp.ActionApprove, msg, func(c *fakeslack.Click) { c.Value = string(forged) })
	if st, _ := e.post(t, body, time.Now(), secret); st != 200 {
		t.Fatalf("status %d", st)
	}
	e.ephemeral(t, grace, "payload hash differs")
	body = clickRequest(grace, slackapp.ActionReject, msg, func(c *fakeslack.Click) { c.Value = string(forged) })
	e.post(t, body, time.Now(), secret)
	e.fake.Wait(t, 5*time.Second, "two refusals", func() bool { return len(e.fake.Ephemerals(grace)) == 2 })
	if cur := e.get(t, op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 {
		t.Fatalf("operation changed: %s", cur.Status)
	}
	// The honest button still works: the forged click used nothing up.
	e.click(t, grace, slackapp.ActionApprove, msg)
	e.waitStatus(t, op.Key, approval.StatusSucceeded)
}

func TestRejectThroughModal(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	// The modal opens in the background: the acknowledgement does not wait
	// for Slack even when Slack is slow.
	e.fake.Fail("views.open", 1, fakeslack.Failure{Delay: 3 * time.Second})
	body := clickRequest(grace, slackapp.ActionReject, msg, func(c *fakeslack.Click) { c.TriggerID = "trig-1" })
	start := time.Now()
	if st, _ := e.post(t, body, time.Now(), secret); st != 200 {
		t.Fatalf("status %d", st)
	}
	if ack := time.Since(start); ack >= 3*time.Second {
		t.Fatalf("acknowledged after %s, behind Slack's slow answer", ack)
	}
	e.fake.WaitCalls(t, "views.open", 1)
	views := e.fake.Views()
	if len(views) != 1 || views[0].TriggerID != "trig-1" || views[0].CallbackID != slackapp.CallbackReject {
		t.Fatalf("views = %+v", views)
	}
	if cur := e.get(t, op.Key); cur.Status != approval.StatusPending {
		t.Fatalf("opening the modal decided: %s", cur.Status)
	}
	sub := func(reason string) (int, string) {
		return e.post(t, fakeslack.FormBody(fakeslack.ViewSubmission(fakeslack.Submission{
			UserID: grace, TeamID: "T0FAKE", CallbackID: views[0].CallbackID, PrivateMetadata: views[0].PrivateMetadata,
			Values: map[string]map[string]string{"reason": {"reason": reason}},
		})), time.Now(), secret)
	}
	// A blank reason keeps the modal open with an error.
	st, resp := sub("   ")
	if st != 200 || !strings.Contains(resp, `"response_action":"errors"`) {
		t.Fatalf("blank reason: %d %s", st, resp)
	}
	if st, resp = sub("Wrong channel: post it in #releases <please>"); st != 200 || resp != "" {
		t.Fatalf("submission: %d %q", st, resp)
	}
	done := e.waitStatus(t, op.Key, approval.StatusRejected)
	v := approval.AgentView(done, time.Now())
	if v.Approval.Rejection == nil || v.Approval.Rejection.Reason != "Wrong channel: post it in #releases <please>" ||
		v.Approval.Rejection.Via != "slack" || v.Approval.Rejection.Approver != "grace" {
		t.Fatalf("agent sees %+v", v.Approval.Rejection)
	}
	if !strings.Contains(v.NextStep, "Wrong channel: post it in #releases") {
		t.Fatalf("next step: %s", v.NextStep)
	}
	cur := e.waitMessage(t, msg, "the message to show the rejection", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "Rejected by *Grace Park* via slack")
	})
	if hasButtons(cur) || !strings.Contains(cur.AllText(), "Wrong channel: post it in #releases &lt;please&gt;") {
		t.Fatalf("message:\n%s", cur.AllText())
	}
	if n := len(e.fake.Messages(e.fake.ChannelID("#general"))); n != 0 {
		t.Fatal("a rejected message was posted")
	}
	// Submitting again (a second modal) is a repeat decision.
	st, resp = sub("again")
	if st != 200 || !strings.Contains(resp, "already rejected") {
		t.Fatalf("second submission: %d %s", st, resp)
	}
}

func TestQuorumBySlackAndEmail(t *testing.T) {
	e := newEnv(t, opts{required: 2})
	op := e.prepareSend(t, "two people agree")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	e.click(t, grace, slackapp.ActionApprove, msg)
	// Partial quorum: the message says so and keeps its buttons.
	cur := e.waitMessage(t, msg, "the message to show 1 of 2", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "1 of 2 approvals")
	})
	if !hasButtons(cur) {
		t.Fatal("buttons removed before quorum")
	}
	if st := e.get(t, op.Key).Status; st != approval.StatusPending {
		t.Fatalf("status %s after one approval", st)
	}
	link, _ := e.email.link(t, op.Key, "ada")
	if _, res, err := e.svc.DecideByLink(bg, link, true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("email approval: %v %v", res, err)
	}
	done := e.waitStatus(t, op.Key, approval.StatusSucceeded)
	vias := map[string]string{}
	for _, d := range done.Approvals {
		vias[d.Approver] = d.Via
	}
	if vias["grace"] != "slack" || vias["ada"] != "email" {
		t.Fatalf("approvals %v", vias)
	}
	cur = e.waitMessage(t, msg, "the message to show success", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "Done")
	})
	if hasButtons(cur) || !strings.Contains(cur.AllText(), "Ada Lovelace* via email") || !strings.Contains(cur.AllText(), "Grace Park* via slack") {
		t.Fatalf("message:\n%s", cur.AllText())
	}
	if n := len(e.fake.Messages(e.fake.ChannelID("#general"))); n != 1 {
		t.Fatalf("%d posts", n)
	}
}

func TestEmailApprovalUpdatesSlackMessage(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	link, _ := e.email.link(t, op.Key, "grace")
	if _, res, err := e.svc.DecideByLink(bg, link, true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("email approval: %v %v", res, err)
	}
	e.waitStatus(t, op.Key, approval.StatusSucceeded)
	cur := e.waitMessage(t, msg, "the message to show the email approval", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "Done") && strings.Contains(m.AllText(), "Approved by *Grace Park* via email")
	})
	if hasButtons(cur) {
		t.Fatal("buttons left")
	}
	// A late Slack click is explained, not counted.
	e.click(t, ada, slackapp.ActionApprove, msg)
	e.ephemeral(t, ada, "no longer waiting for decisions: it is succeeded")
	if n := len(e.fake.Messages(e.fake.ChannelID("#general"))); n != 1 {
		t.Fatalf("%d posts", n)
	}
}

// Slack answers 500 and then 429 to the approval message: the job is
// retried (after Retry-After) and delivered once; the email of the same
// operation goes out at once.
func TestSlackOutageRetriedAndEmailNotDelayed(t *testing.T) {
	e := newEnv(t, opts{})
	e.fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 500})
	e.fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 429, RetryAfter: 5 * time.Second})
	sent := time.Now()
	op := e.prepareSend(t, "hello")
	_, emailed := e.email.link(t, op.Key, "grace")
	posted := e.approvalMessages(t, op.Key, 1)
	delivered := time.Now()
	if len(posted) != 1 {
		t.Fatalf("%d approval messages", len(posted))
	}
	calls := e.fake.Calls("chat.postMessage")
	if len(calls) != 3 || calls[0].Status != 500 || calls[1].Status != 429 || calls[2].Status != 200 {
		t.Fatalf("calls: %s", e.fake.Summary())
	}
	// Retry-After was honoured: the third call came at least 5 s after the second.
	if gap := calls[2].At.Sub(calls[1].At); gap < 5*time.Second {
		t.Fatalf("retried %s after a 429 with Retry-After: 5", gap)
	}
	// The email did not wait for Slack.
	if !emailed.Before(calls[1].At) {
		t.Fatalf("email at +%s, after Slack's second attempt at +%s", emailed.Sub(sent), calls[1].At.Sub(sent))
	}
	t.Logf("email delivered %s after send; Slack delivered %s after send", emailed.Sub(sent), delivered.Sub(sent))
	var failed int
	for len(e.events) > 0 {
		if ev := <-e.events; ev.Event == "notify_failed" && ev.Operation == op.Key {
			failed++
		}
	}
	if failed != 2 {
		t.Fatalf("%d notify_failed events", failed)
	}
	deadline := time.Now().Add(5 * time.Second)
	for cur := e.get(t, op.Key); len(cur.Deliveries) != 4; cur = e.get(t, op.Key) {
		if time.Now().After(deadline) {
			t.Fatalf("deliveries %+v", cur.Deliveries)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The message delivered late still works.
	e.click(t, grace, slackapp.ActionApprove, posted[0])
	e.waitStatus(t, op.Key, approval.StatusSucceeded)
}

func TestDirectMessagesToEachApprover(t *testing.T) {
	e := newEnv(t, opts{required: 1, notify: []string{"slack:dm"}})
	op := e.prepareSend(t, "hello")
	msgs := e.approvalMessages(t, op.Key, 3)
	chans := map[string]bool{}
	for _, m := range msgs {
		chans[m.Channel] = true
	}
	for _, u := range []string{grace, ada, sam} {
		if !chans[fakeslack.DMChannel(u)] {
			t.Fatalf("no DM to %s: %v", u, chans)
		}
	}
	var adas fakeslack.Message
	for _, m := range msgs {
		if m.Channel == fakeslack.DMChannel(ada) {
			adas = m
		}
	}
	e.click(t, ada, slackapp.ActionApprove, adas)
	e.waitStatus(t, op.Key, approval.StatusSucceeded)
	for _, m := range msgs {
		cur := e.waitMessage(t, m, "every DM to show the outcome", func(m fakeslack.Message) bool {
			return strings.Contains(m.AllText(), "Approved by *Ada Lovelace* via slack")
		})
		if hasButtons(cur) {
			t.Fatalf("buttons left in %s", m.Channel)
		}
	}
}

func TestExpiryUpdatesMessageAndLateClickIsExplained(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	e.clock.Add(2 * time.Hour)
	cur := e.waitMessage(t, msg, "the message to show the expiry", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), ":alarm_clock: *Expired*")
	})
	if hasButtons(cur) {
		t.Fatal("buttons left")
	}
	e.click(t, grace, slackapp.ActionApprove, msg)
	e.ephemeral(t, grace, "it is expired")
	if st := e.get(t, op.Key).Status; st != approval.StatusExpired {
		t.Fatalf("status %s", st)
	}
}

func TestCanceledOperationUpdatesMessage(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	if _, err := e.svc.Cancel(bg, e.agent, op.Key); err != nil {
		t.Fatal(err)
	}
	cur := e.waitMessage(t, msg, "the message to show the cancellation", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "*Canceled*")
	})
	if hasButtons(cur) {
		t.Fatal("buttons left")
	}
}

func TestOtherWorkspaceIsRefused(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	body := clickRequest(grace, slackapp.ActionApprove, msg, func(c *fakeslack.Click) { c.TeamID = "T0OTHER" })
	e.post(t, body, time.Now(), secret)
	e.ephemeral(t, grace, "not the one countersign is set up for")
	if cur := e.get(t, op.Key); len(cur.Approvals) != 0 {
		t.Fatal("counted")
	}
}

func TestMalformedRequests(t *testing.T) {
	e := newEnv(t, opts{})
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{"no payload", "foo=bar", 400},
		{"not json", "payload=%7Bnope", 400},
		{"ssl check", "ssl_check=1&token=x", 200},
		{"other interaction", "payload=" + `{"type":"shortcut","user":{"id":"U0GRACE"}}`, 200},
		{"button without value", string(fakeslack.FormBody(fakeslack.BlockActions(fakeslack.Click{UserID: grace, TeamID: "T0FAKE",
			ActionID: "approve", ChannelID: "C1", MessageTS: "1.1"}))), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if st, resp := e.post(t, []byte(tc.body), time.Now(), secret); st != tc.want {
				t.Fatalf("status %d %s, want %d", st, resp, tc.want)
			}
		})
	}
	e.ephemeral(t, grace, "not a valid countersign button")
}

// The reject modal carries what the submission needs and nothing more.
func TestRejectModalShape(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	e.click(t, grace, slackapp.ActionReject, msg)
	e.fake.WaitCalls(t, "views.open", 1)
	var view slack.ModalViewRequest
	if err := json.Unmarshal(e.fake.Views()[0].Raw, &view); err != nil {
		t.Fatal(err)
	}
	if view.Title.Text != "Reject" || view.Submit.Text != "Reject" || len(view.Blocks.BlockSet) != 2 {
		t.Fatalf("view %+v", view)
	}
	in, ok := view.Blocks.BlockSet[1].(*slack.InputBlock)
	if !ok || in.BlockID != "reason" || in.Optional {
		t.Fatalf("input block %+v", view.Blocks.BlockSet[1])
	}
	var meta map[string]string
	_ = json.Unmarshal([]byte(view.PrivateMetadata), &meta)
	if meta["op"] != op.Key || meta["hash"] != op.PayloadHash {
		t.Fatalf("metadata %v", meta)
	}
}

// prepare_undo of a posted message drafts slack.delete_message, which
// shows the message's text, needs its own approval, and deletes it.
func TestUndoDeletesThePostedMessage(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "posted by mistake")
	e.click(t, grace, slackapp.ActionApprove, e.approvalMessages(t, op.Key, 1)[0])
	done := e.waitStatus(t, op.Key, approval.StatusSucceeded)
	var r slackpost.Result
	_ = json.Unmarshal(done.Result, &r)

	undo, created, err := e.svc.PrepareUndo(bg, e.agent, op.Key)
	if err != nil || !created {
		t.Fatalf("prepare undo: %v", err)
	}
	if undo.Action != slackpost.DeleteName || undo.Undoes != op.Key || undo.State == nil {
		t.Fatalf("undo %+v", undo)
	}
	if _, err := e.svc.Send(bg, e.agent, undo.Key); err != nil {
		t.Fatal(err)
	}
	msg := e.approvalMessages(t, undo.Key, 1)[0]
	if !strings.Contains(msg.AllText(), "Delete a Slack message") || !strings.Contains(msg.AllText(), "posted by mistake") {
		t.Fatalf("undo approval message:\n%s", msg.AllText())
	}
	if m, _ := e.fake.Message(r.Channel, r.TS); m.Deleted {
		t.Fatal("deleted before approval")
	}
	e.click(t, ada, slackapp.ActionApprove, msg)
	e.waitStatus(t, undo.Key, approval.StatusSucceeded)
	if m, _ := e.fake.Message(r.Channel, r.TS); !m.Deleted {
		t.Fatal("not deleted")
	}
	if got := e.get(t, op.Key).UndoneBy; got != undo.Key {
		t.Fatalf("undone_by = %q", got)
	}
}

// The reject modal names the operation by its title, which carries agent
// text (a Slack channel name may hold U+3164 HANGUL FILLER, a letter that
// shows as nothing): it is shown escaped, as in the approval message.
func TestRejectModalTitleIsEscaped(t *testing.T) {
	e := newEnv(t, opts{})
	in, _ := json.Marshal(map[string]string{"channel": "#gen\u3164eral", "text": "hello"})
	op, _, err := e.svc.Prepare(bg, e.agent, approval.PrepareCall{Action: slackpost.Name, Input: in})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if op, err = e.svc.Send(bg, e.agent, op.Key); err != nil {
		t.Fatalf("send: %v", err)
	}
	e.click(t, grace, slackapp.ActionReject, e.approvalMessages(t, op.Key, 1)[0])
	e.fake.WaitCalls(t, "views.open", 1)
	raw := string(e.fake.Views()[0].Raw)
	var view slack.ModalViewRequest
	if err := json.Unmarshal([]byte(raw), &view); err != nil {
		t.Fatal(err)
	}
	head, _ := json.Marshal(view.Blocks.BlockSet[0])
	if strings.ContainsRune(string(head), '\u3164') || strings.Contains(raw, `\u3164`) {
		t.Fatalf("the reject modal shows U+3164 as is: %s", head)
	}
	if !strings.Contains(string(head), "gen⟨U+3164⟩eral") {
		t.Fatalf("the reject modal does not show the escaped title: %s", head)
	}
}
