package slack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"testing"
	"time"

	actemail "github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
	notifyslack "github.com/countersign/countersign/channel/slack"
	"github.com/countersign/countersign/internal/testing/fakeslack"
	slackgo "github.com/slack-go/slack"
)

var bg = context.Background()

var expires = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func message(status approval.Status) approval.Message {
	return approval.Message{
		OperationKey: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: "email.send",
		Title: "Send an email to client@client.example", Summary: "One email, sent as support@example.com.",
		Fields: []approval.ShownField{
			{Name: "to", Label: "To", Value: "client@client.example"},
			{Name: "subject", Label: "Subject", Value: "Your *refund* <!channel>"},
			{Name: "text", Label: "Text", Value: "Hello <@U999>,\n<https://evil.example|your bank> & more", Long: true, Lines: 2, Chars: 55},
		},
		Diff:      []approval.ShownChange{{Field: "start", Before: `"09:00"`, After: `"10:00"`}},
		Warnings:  []string{"irreversible: an email cannot be recalled"},
		Requester: "support-agent", OnBehalfOf: "Sam Lee",
		PayloadHash: "sha256:3f9a1c0d2b7e" + strings.Repeat("0", 52), ExpiresAt: expires,
		Required: 1, Status: status, Outcome: "Waiting for approval (1 required).",
	}
}

func TestRenderPendingHasExactPreviewAndButtons(t *testing.T) {
	text, blocks := notifyslack.Render(message(approval.StatusPending))
	if got, want := text, "Approval needed: Send an email to client@client.example (sha256:3f9a1c0d2b7e)"; got != want {
		t.Fatalf("text = %q, want %q", got, want)
	}
	raw, _ := json.Marshal(blocks)
	m := fakeMessage(t, raw)
	all := m.AllText()
	for _, want := range []string{
		"Approval needed: email.send",                                           // header
		"│ Send an email to client@client.example",                              // title, fenced
		"│ Your *refund* <!channel>",                                            // a value, verbatim, as plain text, fenced
		"│ Hello <@U999>,\n│ <https://evil.example|your bank> & more",           // a long value, verbatim, every line fenced
		"│ start\n│   before: \"09:00\"\n│   after:  \"10:00\"",                 // the diff
		"irreversible: an email cannot be recalled",                             // warnings
		"Requested by *support-agent* on behalf of *Sam Lee*",                   // who
		"Fingerprint `sha256:3f9a1c0d2b7e`",                                     // hash prefix
		fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|", expires.Unix()), // expiry
	} {
		if !strings.Contains(all, want) {
			t.Errorf("message lacks %q:\n%s", want, all)
		}
	}
	// Values never reach mrkdwn, where they could mention or link.
	var objs []map[string]any
	collectText(t, raw, &objs)
	for _, o := range objs {
		if o["type"] == "mrkdwn" && (strings.Contains(o["text"].(string), "<!channel>") || strings.Contains(o["text"].(string), "<@U999>")) {
			t.Errorf("unsafe mrkdwn: %v", o["text"])
		}
	}
	approve, reject := m.Button("approve"), m.Button("reject")
	if approve == nil || reject == nil {
		t.Fatalf("buttons missing: %s", raw)
	}
	if approve.Style != slackgo.StylePrimary || reject.Style != slackgo.StyleDanger {
		t.Errorf("styles %q %q", approve.Style, reject.Style)
	}
	if approve.Confirm == nil || approve.Confirm.Confirm.Text != "Approve" {
		t.Errorf("approve has no confirm dialog")
	}
	var v notifyslack.ButtonValue
	if err := json.Unmarshal([]byte(approve.Value), &v); err != nil || v.Operation != "op_aaaaaaaaaaaaaaaaaaaaaaaaaa" ||
		v.PayloadHash != message("").PayloadHash || reject.Value != approve.Value {
		t.Errorf("button value %q (%v)", approve.Value, err)
	}
	if got, want := m.ActionBlockID(), "countersign:op_aaaaaaaaaaaaaaaaaaaaaaaaaa"; got != want {
		t.Errorf("block_id = %q, want %q", got, want)
	}
}

func TestRenderDecidedHasOutcomeAndNoButtons(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		status approval.Status
		want   string
	}{
		{approval.StatusSucceeded, ":white_check_mark: *Done*"},
		{approval.StatusRejected, ":no_entry: *Rejected*"},
		{approval.StatusExpired, ":alarm_clock: *Expired*"},
		{approval.StatusCanceled, ":heavy_multiplication_x: *Canceled*"},
		{approval.StatusFailed, ":x: *Failed*"},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			m := message(tc.status)
			m.Outcome = "Outcome <b>"
			if tc.status == approval.StatusRejected {
				m.Rejection = &approval.DecisionView{Approver: "grace", Name: "Grace Park", Via: "slack", At: at, Reason: "wrong <client>"}
			} else {
				m.Approvals = []approval.DecisionView{{Approver: "grace", Name: "Grace Park", Via: "email", At: at}}
			}
			text, blocks := notifyslack.Render(m)
			raw, _ := json.Marshal(blocks)
			msg := fakeMessage(t, raw)
			if msg.Button("approve") != nil || msg.Button("reject") != nil {
				t.Fatalf("buttons left on a %s message", tc.status)
			}
			all := msg.AllText()
			if !strings.Contains(all, tc.want+" — Outcome &lt;b&gt;") {
				t.Errorf("no outcome line %q in\n%s", tc.want, all)
			}
			who := "Approved by *Grace Park* via email, " + notifyslack.SlackDate(at)
			if tc.status == approval.StatusRejected {
				who = "Rejected by *Grace Park* via slack, " + notifyslack.SlackDate(at) + ": “wrong &lt;client&gt;”"
			}
			if !strings.Contains(all, who) {
				t.Errorf("no %q in\n%s", who, all)
			}
			if !strings.HasSuffix(text, ": Outcome &lt;b&gt;") {
				t.Errorf("text = %q", text)
			}
		})
	}
}

func TestRenderPartialQuorumKeepsButtons(t *testing.T) {
	m := message(approval.StatusPending)
	m.Required = 2
	m.Approvals = []approval.DecisionView{{Approver: "grace", Name: "Grace Park", Via: "slack", At: expires.Add(-time.Hour)}}
	_, blocks := notifyslack.Render(m)
	raw, _ := json.Marshal(blocks)
	msg := fakeMessage(t, raw)
	if msg.Button("approve") == nil || !strings.Contains(msg.AllText(), "1 of 2 approvals") {
		t.Fatalf("partial quorum message:\n%s", msg.AllText())
	}
}

func TestRenderStaysWithinSlackLimits(t *testing.T) {
	m := message(approval.StatusPending)
	m.Title = strings.Repeat("T", 400)
	m.Fields = nil
	for i := range 30 {
		m.Fields = append(m.Fields, approval.ShownField{Name: fmt.Sprint(i), Label: fmt.Sprint("Field ", i), Value: strings.Repeat("x", 5000), Long: true})
	}
	_, blocks := notifyslack.Render(m)
	if len(blocks) > 50 {
		t.Fatalf("%d blocks, Slack allows 50", len(blocks))
	}
	raw, _ := json.Marshal(blocks)
	var objs []map[string]any
	collectText(t, raw, &objs)
	for _, o := range objs {
		if n := len([]rune(o["text"].(string))); n > 3000 {
			t.Fatalf("text object of %d characters", n)
		}
	}
	msg := fakeMessage(t, raw)
	if !strings.Contains(msg.AllText(), "Too long for one Slack message") {
		t.Fatalf("no truncation warning")
	}
	// What is not shown cannot be approved here: Review takes its place.
	if msg.Button("approve") != nil {
		t.Fatal("a truncated message offers Approve")
	}
	if msg.Button("review") == nil || msg.Button("reject") == nil {
		t.Fatal("no Review and Reject on a truncated message")
	}
	if h := blocks[0].(*slackgo.HeaderBlock); len([]rune(h.Text.Text)) > 150 {
		t.Fatalf("header of %d characters", len([]rune(h.Text.Text)))
	}
}

// fakeMessage decodes blocks the way the fake does, for its helpers.
func fakeMessage(t *testing.T, raw []byte) fakeslack.Message {
	t.Helper()
	var b slackgo.Blocks
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("blocks do not decode: %v", err)
	}
	return fakeslack.Message{Blocks: b, RawBlocks: string(raw)}
}

func collectText(t *testing.T, raw []byte, out *[]map[string]any) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["text"].(string); ok {
				*out = append(*out, x)
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
}

func notice(target string, approver *approval.Approver) approval.Notice {
	job := approval.Job{ID: "slack:" + target, Channel: "slack", Target: target}
	if approver != nil {
		job.ID += ":" + approver.ID
		job.Approver = approver.ID
	}
	return approval.Notice{Job: job, Message: message(approval.StatusPending), Approver: approver}
}

func TestNotifyChannelAndUpdate(t *testing.T) {
	fake := fakeslack.New(t)
	n := notifyslack.New(notifyslack.Config{Client: fake.Client("xoxb")})
	h, err := n.Notify(bg, notice("#approvals", nil))
	if err != nil {
		t.Fatal(err)
	}
	ch := fake.ChannelID("#approvals")
	if h["channel"] != ch || h["ts"] == "" {
		t.Fatalf("handle = %v", h)
	}
	msg, _ := fake.Message(ch, h["ts"])
	if msg.Button("approve") == nil || msg.Metadata == nil || msg.Metadata.EventPayload["operation_key"] != "op_aaaaaaaaaaaaaaaaaaaaaaaaaa" {
		t.Fatalf("posted %+v", msg)
	}
	if c := fake.Calls("chat.postMessage")[0]; c.Form.Get("unfurl_links") != "false" {
		t.Errorf("links unfurl: %v", c.Form)
	}

	done := message(approval.StatusSucceeded)
	done.Outcome = "Approved by Grace Park (slack). Done: it ran successfully."
	if err := n.Update(bg, approval.Delivery{Job: "slack:#approvals", Channel: "slack", Handle: h}, done); err != nil {
		t.Fatal(err)
	}
	msg, _ = fake.Message(ch, h["ts"])
	if msg.Updates != 1 || msg.Button("approve") != nil || !strings.Contains(msg.AllText(), "Done: it ran successfully") {
		t.Fatalf("updated: %+v\n%s", msg, msg.AllText())
	}

	// A message someone deleted is left alone, not retried forever.
	_, _, _ = fake.Client("xoxb").DeleteMessageContext(bg, ch, h["ts"])
	if err := n.Update(bg, approval.Delivery{Handle: h}, done); err != nil {
		t.Fatalf("update of a deleted message: %v", err)
	}
}

func TestNotifyDMOpensConversationOnce(t *testing.T) {
	fake := fakeslack.New(t)
	n := notifyslack.New(notifyslack.Config{Client: fake.Client("xoxb")})
	grace := &approval.Approver{ID: "grace", Name: "Grace Park", SlackUserID: "U012ABCDEF"}
	for range 2 {
		h, err := n.Notify(bg, notice("dm", grace))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := h["channel"], fakeslack.DMChannel("U012ABCDEF"); got != want {
			t.Fatalf("channel = %s, want %s", got, want)
		}
	}
	if got, want := fake.Count("conversations.open"), 1; got != want {
		t.Fatalf("conversations.open calls = %d, want %d", got, want)
	}
	if _, err := n.Notify(bg, notice("dm", &approval.Approver{ID: "x"})); err == nil {
		t.Fatal("DM to an approver without slack_user_id")
	}
}

func TestNotifyErrors(t *testing.T) {
	fake := fakeslack.New(t)
	n := notifyslack.New(notifyslack.Config{Client: fake.Client("xoxb")})

	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 429, RetryAfter: 3 * time.Second})
	_, err := n.Notify(bg, notice("#approvals", nil))
	var ra *approval.RetryAfterError
	if !errors.As(err, &ra) || ra.After != 3*time.Second {
		t.Fatalf("429: %v", err)
	}
	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 500})
	if _, err = n.Notify(bg, notice("#approvals", nil)); err == nil || errors.As(err, &ra) {
		t.Fatalf("500: %v", err)
	}
	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Error: "not_in_channel"})
	if _, err = n.Notify(bg, notice("#approvals", nil)); err == nil || !strings.Contains(err.Error(), "/invite") {
		t.Fatalf("not_in_channel: %v", err)
	}
	fake.Fail("chat.update", 1, fakeslack.Failure{Status: 429, RetryAfter: 2 * time.Second})
	err = n.Update(bg, approval.Delivery{Handle: map[string]string{"channel": "C1", "ts": "1.1"}}, message(approval.StatusExpired))
	if !errors.As(err, &ra) || ra.After != 2*time.Second {
		t.Fatalf("update 429: %v", err)
	}
	if got := len(fake.Messages("")); got != 0 {
		t.Fatalf("%d messages posted by failed calls", got)
	}
}

// A post that Slack carried out but answered with a 5xx is found on the
// retry, not posted again.
func TestAmbiguousFailureDoesNotPostTwice(t *testing.T) {
	fake := fakeslack.New(t)
	n := notifyslack.New(notifyslack.Config{Client: fake.Client("xoxb")})
	ch := fake.ChannelID("#approvals")
	for _, target := range []string{ch, "#approvals"} {
		t.Run(target, func(t *testing.T) {
			nt := notice(target, nil)
			nt.Job.ID = "job-" + target
			if target == "#approvals" {
				// The name's id is learned from an earlier post.
				other := notice(target, nil)
				other.Job.ID = "warm-up"
				if _, err := n.Notify(bg, other); err != nil {
					t.Fatal(err)
				}
			}
			before := len(fake.Messages(ch))
			fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 503, AfterEffect: true})
			if _, err := n.Notify(bg, nt); err == nil {
				t.Fatal("no error")
			}
			h, err := n.Notify(bg, nt)
			if err != nil {
				t.Fatal(err)
			}
			msgs := fake.Messages(ch)
			if got, want := len(msgs)-before, 1; got != want {
				t.Fatalf("%d messages posted, want %d", got, want)
			}
			if fake.Count("conversations.history") == 0 {
				t.Fatal("the retry did not look for the earlier message")
			}
			if h["ts"] != msgs[len(msgs)-1].TS || h["channel"] != ch {
				t.Fatalf("handle %v, message %s", h, msgs[len(msgs)-1].TS)
			}
		})
	}
}

// A Slack that hangs holds the worker only for Timeout, and the message it
// posted meanwhile is found on the retry.
func TestSlowSlackTimesOutAndRetryFindsMessage(t *testing.T) {
	fake := fakeslack.New(t)
	n := notifyslack.New(notifyslack.Config{Client: fake.Client("xoxb"), Timeout: 200 * time.Millisecond})
	ch := fake.ChannelID("#approvals")
	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Delay: 3 * time.Second})
	start := time.Now()
	if _, err := n.Notify(bg, notice(ch, nil)); err == nil {
		t.Fatal("no error from a hanging Slack")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Notify held the worker for %s", d)
	}
	h, err := n.Notify(bg, notice(ch, nil))
	if err != nil {
		t.Fatal(err)
	}
	if msgs := fake.Messages(ch); len(msgs) != 1 || msgs[0].TS != h["ts"] {
		t.Fatalf("messages %d, handle %v", len(msgs), h)
	}
}

// A 198 KB email text in Slack was cut, 111,521 characters unseen, and
// Approve stayed (issue 8). The message now stays within Slack's limits
// (the fake refuses what Slack would), says how much is not shown, and
// offers Review, never Approve.
func TestLongEmailInSlackOffersNoApprove(t *testing.T) {
	act, err := actemail.New(mailer.NewDevMailbox(1), mail.Address{Address: "agent@corp.example"}, actemail.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("The quarterly numbers, line by line, for the board. \n", 198<<10/53)
	in, _ := json.Marshal(map[string]any{"to": []string{"ann@client.example"}, "subject": "Q3", "text": text})
	p, err := act.Prepare(bg, approval.PrepareRequest{Input: in})
	if err != nil {
		t.Fatal(err)
	}
	op := &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: actemail.Name, Principal: "support-agent",
		PayloadHash: "sha256:" + strings.Repeat("0", 64), Preview: p.Preview, Status: approval.StatusPending,
		ExpiresAt: expires, Route: approval.Route{Required: 1}}
	m := approval.BuildMessage(op, &approval.Policy{}, expires.Add(-time.Hour))

	fake := fakeslack.New(t)
	n := notifyslack.New(notifyslack.Config{Client: fake.Client("xoxb-test")})
	if _, err := n.Notify(bg, approval.Notice{Job: approval.Job{ID: "slack:#approvals", Channel: "slack", Target: "#approvals"}, Message: m}); err != nil {
		t.Fatalf("Slack refused the message: %v", err)
	}
	msg := fake.Messages(fake.ChannelID("#approvals"))[0]
	if msg.Button("approve") != nil {
		t.Fatal("a message that shows part of the email offers Approve")
	}
	if msg.Button("review") == nil || msg.Button("reject") == nil {
		t.Fatal("no Review or Reject")
	}
	if !strings.Contains(msg.AllText(), "characters are not shown here") {
		t.Errorf("the message does not say it is cut:\n%.2000s", msg.AllText())
	}
}

// An allowance in force offers Revoke; nothing else does, and no decided
// message offers Approve or Reject beside it.
func TestRenderRevocableAllowanceOffersRevokeOnly(t *testing.T) {
	for _, revocable := range []bool{true, false} {
		m := message(approval.StatusSucceeded)
		m.Action, m.Revocable = approval.GrantAction, revocable
		_, blocks := notifyslack.Render(m)
		raw, _ := json.Marshal(blocks)
		msg := fakeMessage(t, raw)
		if got := msg.Button(notifyslack.ActionRevoke) != nil; got != revocable {
			t.Errorf("revocable %v: Revoke button %v", revocable, got)
		}
		if msg.Button("approve") != nil || msg.Button("reject") != nil {
			t.Errorf("a decided allowance offers a decision")
		}
	}
	m := message(approval.StatusPending)
	m.Revocable = true // never beside the decision buttons
	_, blocks := notifyslack.Render(m)
	raw, _ := json.Marshal(blocks)
	if fakeMessage(t, raw).Button(notifyslack.ActionRevoke) != nil {
		t.Error("a pending message offers Revoke")
	}
}

// Edit is offered beside the decision buttons where the route allows
// edits, never on a decided message or a step_up one (decided on the page).
func TestRenderEditButton(t *testing.T) {
	for _, tc := range []struct {
		status   approval.Status
		editable bool
		stepUp   string
		want     bool
	}{
		{approval.StatusPending, true, "", true},
		{approval.StatusPending, false, "", false},
		{approval.StatusPending, true, "passkey", false},
		{approval.StatusSucceeded, true, "", false},
	} {
		m := message(tc.status)
		m.Editable, m.StepUp = tc.editable, tc.stepUp
		_, blocks := notifyslack.Render(m)
		raw, _ := json.Marshal(blocks)
		if got := fakeMessage(t, raw).Button(notifyslack.ActionEdit) != nil; got != tc.want {
			t.Errorf("%s editable=%v step_up=%q: Edit %v, want %v", tc.status, tc.editable, tc.stepUp, got, tc.want)
		}
	}
}

// Warnings quote agent text (addresses, link targets, words): they are
// laid out as plain text, so that an address "*ceo*@client.example" is
// not shown in bold as "ceo@client.example", another address.
func TestWarningsAreShownAsWritten(t *testing.T) {
	m := message(approval.StatusPending)
	m.Warnings = append(m.Warnings, "Recipients outside corp.example: *ceo*@client.example, _cfo_@client.example, ~x~@client.example.")
	_, blocks := notifyslack.Render(m)
	found := false
	for _, b := range blocks {
		s, ok := b.(*slackgo.SectionBlock)
		if !ok || s.Text == nil || !strings.Contains(s.Text.Text, "*ceo*@client.example") {
			continue
		}
		found = true
		if s.Text.Type != slackgo.PlainTextType {
			t.Errorf("the warnings are %s, where *…*, _…_ and ~…~ are formatting: %q", s.Text.Type, s.Text.Text)
		}
	}
	if !found {
		t.Fatal("no block shows the warning")
	}
}
