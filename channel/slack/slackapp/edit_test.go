package slackapp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/slack/slackapp"
	"github.com/countersign/countersign/internal/testing/fakeslack"
)

// On a route with allow_edit the message offers Edit: the clicking
// approver alone gets a modal with the text as it is; submitting makes a
// new version that goes to the approvers, the original ends superseded
// (its message says so), and approving the new version runs the edited
// text, once.
func TestEditFromSlackMakesANewVersion(t *testing.T) {
	e := newEnv(t, opts{allowEdit: true})
	op := e.prepareSend(t, "Deploy v2 is liev")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	if msg.Button(slackapp.ActionEdit) == nil || msg.Button(slackapp.ActionApprove) == nil {
		t.Fatalf("no Edit beside Approve:\n%s", msg.RawBlocks)
	}

	// Someone who is not an approver gets no modal.
	e.click(t, stranger, slackapp.ActionEdit, msg)
	e.fake.Wait(t, 5*time.Second, "the stranger's refusal", func() bool { return len(e.fake.Ephemerals(stranger)) == 1 })

	body := clickRequest(grace, slackapp.ActionEdit, msg, func(c *fakeslack.Click) { c.TriggerID = "trig-edit" })
	if st, resp := e.post(t, body, time.Now(), secret); st != 200 {
		t.Fatalf("edit click: %d %s", st, resp)
	}
	e.fake.WaitCalls(t, "views.open", 1)
	views := e.fake.Views()
	if len(views) != 1 || views[0].CallbackID != slackapp.CallbackEdit || views[0].TriggerID != "trig-edit" ||
		!strings.Contains(string(views[0].Raw), `"initial_value":"Deploy v2 is liev"`) {
		t.Fatalf("edit modal: %+v", views)
	}
	submit := func(user, text string) (int, string) {
		return e.post(t, fakeslack.FormBody(fakeslack.ViewSubmission(fakeslack.Submission{
			UserID: user, TeamID: "T0FAKE", CallbackID: views[0].CallbackID, PrivateMetadata: views[0].PrivateMetadata,
			Values: map[string]map[string]string{"f0": {"v": text}},
		})), time.Now(), secret)
	}
	// Unchanged: the modal stays open with the reason on the field.
	if st, resp := submit(grace, "Deploy v2 is liev"); st != 200 || !strings.Contains(resp, `"response_action":"errors"`) ||
		!strings.Contains(resp, "nothing was changed") {
		t.Fatalf("unchanged submission: %d %s", st, resp)
	}
	// A stranger's submission of grace's modal changes nothing.
	if _, resp := submit(stranger, "Deploy v3 is live"); !strings.Contains(resp, "Not recorded") {
		t.Fatalf("stranger's submission: %s", resp)
	}
	st, resp := submit(grace, "Deploy v2 is live")
	if st != 200 || !strings.Contains(resp, "You edited it") {
		t.Fatalf("submission: %d %s", st, resp)
	}
	old := e.get(t, op.Key)
	if old.Status != approval.StatusSuperseded || old.SupersededBy == "" {
		t.Fatalf("original: %s, superseded by %q", old.Status, old.SupersededBy)
	}
	e.waitMessage(t, msg, "the original's message to show it was replaced", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "Replaced by an edited version") && m.Button(slackapp.ActionApprove) == nil
	})
	// Submitting the same modal again edits nothing more.
	if _, resp := submit(grace, "Deploy v2 is live!!"); !strings.Contains(resp, "Not recorded") {
		t.Fatalf("second submission: %s", resp)
	}

	next := e.approvalMessages(t, old.SupersededBy, 1)[0]
	if !strings.Contains(next.AllText(), "Deploy v2 is live") {
		t.Fatalf("the new version's message:\n%s", next.AllText())
	}
	e.click(t, ada, slackapp.ActionApprove, next)
	e.waitStatus(t, old.SupersededBy, approval.StatusSucceeded)
	posted := e.fake.Messages(e.fake.ChannelID("#general"))
	if len(posted) != 1 || posted[0].Text != "Deploy v2 is live" {
		t.Fatalf("posted %+v", posted)
	}
	if evs, _ := e.svc.Events(bg, e.agent, op.Key); !strings.Contains(eventsOf(evs), "superseded by approver:grace via slack") {
		t.Fatalf("events: %s", eventsOf(evs))
	}
}

func eventsOf(evs []approval.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.Event + " by " + ev.Actor + " via " + ev.Channel + "\n")
	}
	return b.String()
}

// An agent's text longer than a Slack input holds is never put in a modal
// (Slack would cut it, and the approver would edit and approve a cut
// text): the clicking approver gets a personal approval page instead.
func TestEditTooLongForSlackGoesToThePage(t *testing.T) {
	e := newEnv(t, opts{allowEdit: true})
	op := e.prepareSend(t, strings.Repeat("long text ", 400)) // 4,000 characters
	msg := e.approvalMessages(t, op.Key, 1)[0]
	body := clickRequest(grace, slackapp.ActionEdit, msg, func(c *fakeslack.Click) { c.TriggerID = "trig-long" })
	if st, resp := e.post(t, body, time.Now(), secret); st != 200 {
		t.Fatalf("edit click: %d %s", st, resp)
	}
	got := e.ephemeral(t, grace, "too long to edit in Slack")
	if !strings.Contains(got.Text, "http://countersign.test/a/") {
		t.Fatalf("no personal link: %q", got.Text)
	}
	if n := len(e.fake.Views()); n != 0 {
		t.Fatalf("%d modals opened for a text Slack cannot hold", n)
	}
	if cur := e.get(t, op.Key); cur.Status != approval.StatusPending {
		t.Fatalf("the click changed the operation: %s", cur.Status)
	}
}
