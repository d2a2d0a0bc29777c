package slackapp_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/safetext"
	"github.com/countersign/countersign/channel/slack/slackapp"
	"github.com/countersign/countersign/internal/testing/fakeslack"
	"github.com/slack-go/slack"
)

// longText is a message of n characters in lines of 60.
func longText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(strings.Repeat(string(rune('a'+i%26)), 59) + "\n")
	}
	return b.String()[:n]
}

// unfence joins the fenced plain_text sections of raw blocks back into
// the text they show.
func unfence(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var blocks slack.Blocks
	if err := json.Unmarshal(raw, &blocks); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, b := range blocks.BlockSet {
		s, ok := b.(*slack.SectionBlock)
		if !ok || s.Text == nil || s.Text.Type != slack.PlainTextType || strings.HasPrefix(s.Text.Text, ":warning: Warnings") {
			continue // the warnings, countersign's bullets, are plain text too
		}
		for _, l := range strings.Split(s.Text.Text, "\n") {
			switch {
			case strings.HasPrefix(l, safetext.FenceWrap):
				lines[len(lines)-1] += strings.TrimPrefix(l, safetext.FenceWrap)
			case strings.HasPrefix(l, strings.TrimSpace(safetext.Fence)):
				lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(l, "│"), " "))
			default:
				t.Errorf("an unfenced line of agent text: %q", l)
			}
		}
	}
	return strings.Join(lines, "\n")
}

// A message too long for one Slack message offers no Approve; Review opens
// the whole of it in a modal for the clicking approver, whose Approve
// decides as that approver.
func TestTooLongMessageIsReviewedWholeInAModal(t *testing.T) {
	e := newEnv(t, opts{})
	text := longText(15000)
	op := e.prepareSend(t, text)
	msg := e.approvalMessages(t, op.Key, 1)[0]
	if msg.Button(slackapp.ActionApprove) != nil || msg.Button(slackapp.ActionReview) == nil || msg.Button(slackapp.ActionReject) == nil {
		t.Fatalf("a message that cannot show all of its %d characters: buttons approve=%v review=%v",
			len(text), msg.Button(slackapp.ActionApprove) != nil, msg.Button(slackapp.ActionReview) != nil)
	}
	if !strings.Contains(msg.AllText(), "Too long for one Slack message") {
		t.Fatalf("the message does not say it is cut:\n%s", msg.AllText())
	}

	body := clickRequest(grace, slackapp.ActionReview, msg, func(c *fakeslack.Click) { c.TriggerID = "trig-review" })
	if st, resp := e.post(t, body, time.Now(), secret); st != 200 {
		t.Fatalf("review click: %d %s", st, resp)
	}
	e.fake.WaitCalls(t, "views.open", 1)
	views := e.fake.Views()
	if len(views) != 1 || views[0].CallbackID != slackapp.CallbackReview || views[0].TriggerID != "trig-review" {
		t.Fatalf("views = %+v", views)
	}
	var view struct {
		Blocks json.RawMessage       `json:"blocks"`
		Submit struct{ Text string } `json:"submit"`
	}
	if err := json.Unmarshal(views[0].Raw, &view); err != nil {
		t.Fatal(err)
	}
	if shown := unfence(t, view.Blocks); !strings.Contains(shown, strings.TrimSuffix(text, "\n")) {
		t.Fatalf("the modal does not hold the whole text (%d of %d characters)", len(shown), len(text))
	}
	if view.Submit.Text != "Approve" {
		t.Fatalf("modal submit %q", view.Submit.Text)
	}
	if cur := e.get(t, op.Key); cur.Status != approval.StatusPending {
		t.Fatalf("opening the review decided: %s", cur.Status)
	}
	// Only an approver's submission counts.
	submit := func(user string) (int, string) {
		return e.post(t, fakeslack.FormBody(fakeslack.ViewSubmission(fakeslack.Submission{
			UserID: user, TeamID: "T0FAKE", CallbackID: slackapp.CallbackReview, PrivateMetadata: views[0].PrivateMetadata,
		})), time.Now(), secret)
	}
	if st, resp := submit(stranger); st != 200 || !strings.Contains(resp, "not an approver") {
		t.Fatalf("stranger's submission: %d %s", st, resp)
	}
	if st, resp := submit(grace); st != 200 || resp != "" {
		t.Fatalf("submission: %d %q", st, resp)
	}
	done := e.waitStatus(t, op.Key, approval.StatusSucceeded)
	if len(done.Approvals) != 1 || done.Approvals[0].Approver != "grace" || done.Approvals[0].Via != "slack" {
		t.Fatalf("approvals %+v", done.Approvals)
	}
}

// Past what a modal holds, Review sends the clicking approver, and only
// them, a personal approval link minted for them; nobody else gets one.
func TestTooLongForAModalSendsAPersonalLink(t *testing.T) {
	e := newEnv(t, opts{forbidSelf: true, notify: []string{"slack:#approvals"}})
	text := longText(30000)
	op := e.prepareSend(t, text)
	msg := e.approvalMessages(t, op.Key, 1)[0]
	if msg.Button(slackapp.ActionApprove) != nil || msg.Button(slackapp.ActionReview) == nil {
		t.Fatal("a message too long to show offers Approve, or no Review")
	}
	// Nobody but an approver who may decide gets a link.
	for _, u := range []struct{ user, why string }{
		{stranger, "not an approver"},
		{sam, "on your behalf"},
	} {
		e.click(t, u.user, slackapp.ActionReview, msg)
		e.ephemeral(t, u.user, u.why)
	}
	e.click(t, grace, slackapp.ActionReview, msg)
	got := e.ephemeral(t, grace, "personal approval page")
	i := strings.Index(got.Text, "http://countersign.test/a/")
	if i < 0 || got.User != grace || got.Channel != msg.Channel {
		t.Fatalf("ephemeral %+v", got)
	}
	token := strings.TrimPrefix(strings.Fields(got.Text[i:])[0], "http://countersign.test/a/")
	for _, eph := range e.fake.Ephemerals("") {
		if eph.User != grace && strings.Contains(eph.Text, "/a/") {
			t.Fatalf("%s was sent a link", eph.User)
		}
	}
	for _, m := range e.fake.Messages("") {
		if strings.Contains(m.AllText(), token) {
			t.Fatal("the link is in a channel message")
		}
	}
	// The link is grace's: opening it shows the whole operation, deciding
	// with it counts for grace, once.
	v, err := e.svc.OpenLink(bg, token)
	if err != nil || v.Problem != approval.LinkOK || v.Approver.ID != "grace" {
		t.Fatalf("open link: %+v %v", v, err)
	}
	if _, res, err := e.svc.DecideByLink(bg, token, true, ""); err != nil || res.Outcome != approval.DecideApproved {
		t.Fatalf("decide: %+v %v", res, err)
	}
	done := e.waitStatus(t, op.Key, approval.StatusSucceeded)
	if len(done.Approvals) != 1 || done.Approvals[0].Approver != "grace" {
		t.Fatalf("approvals %+v", done.Approvals)
	}
	// Grace has decided: no second link.
	e.click(t, grace, slackapp.ActionReview, msg)
	e.ephemeral(t, grace, "already")
}

// The service's own rules, without Slack: a review link only for an
// approver of the operation who has not decided, for the hash shown.
func TestReviewLinkRules(t *testing.T) {
	e := newEnv(t, opts{forbidSelf: true, notify: []string{"email"}})
	op := e.prepareSend(t, "hello")
	for _, c := range []struct {
		who, hash, want string
	}{
		{"eve", op.PayloadHash, "not an approver"},
		{"sam", op.PayloadHash, "on your behalf"},
		{"grace", "sha256:" + strings.Repeat("0", 64), "does not match"},
	} {
		if _, err := e.svc.ReviewLink(bg, op.Key, c.who, "slack", c.hash); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal saying %q", c.who, err, c.want)
		}
	}
	if _, err := e.svc.ReviewLink(bg, "op_"+strings.Repeat("a", 26), "grace", "slack", op.PayloadHash); approval.ErrorCode(err) != approval.CodeNotFound {
		t.Errorf("unknown operation: %v", err)
	}
	link, err := e.svc.ReviewLink(bg, op.Key, "grace", "slack", op.PayloadHash)
	if err != nil || !strings.HasPrefix(link, "http://countersign.test/a/") {
		t.Fatalf("link %q %v", link, err)
	}
	token := strings.TrimPrefix(link, "http://countersign.test/a/")
	if _, res, err := e.svc.DecideByLink(bg, token, false, "no"); err != nil || res.Outcome != approval.DecideRejected {
		t.Fatalf("decide: %+v %v", res, err)
	}
	if _, err := e.svc.ReviewLink(bg, op.Key, "ada", "slack", op.PayloadHash); err == nil || !strings.Contains(err.Error(), "no longer waiting") {
		t.Errorf("after the rejection: %v", err)
	}
}
