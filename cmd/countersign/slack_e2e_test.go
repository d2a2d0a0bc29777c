package main

// End-to-end tests of Slack: the whole service (startService) with
// SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET and COUNTERSIGN_SLACK_API_URL
// pointing at internal/testing/fakeslack; clicks are signed HTTP requests to
// /slack/interactions; the "email" approval is the approval page, reached
// through the link the console channel prints.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	notifyslack "github.com/countersign/countersign/channel/slack"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/internal/testing/fakeslack"
)

const slackTestSecret = "e2e-signing-secret-0123456789abcdef"

// slackTestConfig routes slack.post_message to grace, ada and sam, with
// the approval message in #approvals and links on the console.
func slackTestConfig(required int, notify string) string {
	return fmt.Sprintf(`
principals:
  - id: support-agent
    api_key_sha256: %q
    scopes: [slack.post_message]
    on_behalf_of: sam
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com, slack_user_id: U0GRACE}
  - {id: ada, name: Ada Lovelace, email: ada@example.com, slack_user_id: U0ADA}
  - {id: sam, name: Sam Lee, email: sam@example.com, slack_user_id: U0SAM}
routes:
  - name: slack-posts
    match: {action: slack.post_message}
    approvers: {ids: [grace, ada, sam]}
    required: %d
    notify: [%s]
    forbid_self_approval: true
`, testKeyHash, required, notify)
}

type slackE2E struct {
	*testService
	fake *fakeslack.Server
}

func startSlackService(t testing.TB, required int, notify string) *slackE2E {
	t.Helper()
	fake := fakeslack.New(t)
	fake.Token = "xoxb-e2e"
	srv := startService(t, serviceOpts{Config: slackTestConfig(required, notify), Env: map[string]string{
		"SLACK_BOT_TOKEN": "xoxb-e2e", "SLACK_SIGNING_SECRET": slackTestSecret, "COUNTERSIGN_SLACK_API_URL": fake.URL(),
	}})
	// The service learns its workspace at start.
	fake.WaitCalls(t, "auth.test", 1)
	return &slackE2E{testService: srv, fake: fake}
}

func (s *slackE2E) prepareSlack(t testing.TB, text string) op {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"action": "slack.post_message", "input": map[string]string{"channel": "#general", "text": text}})
	return s.prepareSend(t, string(in))
}

// approvalMessage waits for the approval message of key, and for its
// delivery to be recorded (as a human's click would, seconds later).
func (s *slackE2E) approvalMessage(t testing.TB, key string) fakeslack.Message {
	t.Helper()
	var found fakeslack.Message
	s.fake.Wait(t, 15*time.Second, "the approval message of "+key, func() bool {
		for _, m := range s.fake.Messages("") {
			if m.Metadata != nil && m.Metadata.EventType == notifyslack.EventType && m.Metadata.EventPayload["operation_key"] == key {
				found = m
				return true
			}
		}
		return false
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, b := s.call(t, "GET", "/v1/operations/"+key, s.APIKey, "")
		var v struct {
			Approval struct {
				Notified []struct {
					Channel string `json:"channel"`
				} `json:"notified"`
			} `json:"approval"`
		}
		_ = json.Unmarshal(b, &v)
		for _, n := range v.Approval.Notified {
			if n.Channel == "slack" {
				return found
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Slack delivery of %s was not recorded: %s", key, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// interact posts a signed interaction to the service over HTTP.
func (s *slackE2E) interact(t testing.TB, body []byte, at time.Time, secret string) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(fakeslack.SignedRequest(s.URL()+"/slack/interactions", secret, at, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func slackClick(user, actionID string, m fakeslack.Message) []byte {
	c := fakeslack.Click{UserID: user, TeamID: "T0FAKE", ActionID: actionID, BlockID: m.ActionBlockID(),
		ChannelID: m.Channel, MessageTS: m.TS}
	if b := m.Button(actionID); b != nil {
		c.Value = b.Value
	}
	return fakeslack.FormBody(fakeslack.BlockActions(c))
}

func (s *slackE2E) click(t testing.TB, user, actionID string, m fakeslack.Message) {
	t.Helper()
	if st, body := s.interact(t, slackClick(user, actionID, m), time.Now(), slackTestSecret); st != 200 {
		t.Fatalf("click: %d %s", st, body)
	}
}

func (s *slackE2E) waitMessage(t testing.TB, m fakeslack.Message, what string, cond func(fakeslack.Message) bool) fakeslack.Message {
	t.Helper()
	var cur fakeslack.Message
	s.fake.Wait(t, 15*time.Second, what, func() bool {
		cur, _ = s.fake.Message(m.Channel, m.TS)
		return cond(cur)
	})
	return cur
}

func slackHasButtons(m fakeslack.Message) bool {
	return m.Button("approve") != nil || m.Button("reject") != nil
}

// Quorum 2 reached by one Slack approval and one approval-page approval;
// the on-behalf-of human's click is refused; the message follows along.
func TestSlackE2EQuorumSlackAndEmailPage(t *testing.T) {
	s := startSlackService(t, 2, `"slack:#approvals", "console"`)
	o := s.prepareSlack(t, "Release *2.1* is out: <https://example.com/notes|notes>")
	msg := s.approvalMessage(t, o.Key)
	if !slackHasButtons(msg) || !strings.Contains(msg.AllText(), "Release *2.1* is out") {
		t.Fatalf("approval message:\n%s", msg.AllText())
	}

	// Sam is the human the agent works for: refused, nothing changes.
	s.click(t, "U0SAM", "approve", msg)
	s.fake.Wait(t, 10*time.Second, "an ephemeral refusal for sam", func() bool {
		e := s.fake.Ephemerals("U0SAM")
		return len(e) == 1 && strings.Contains(e[0].Text, "on your behalf")
	})
	// A stranger: refused.
	s.click(t, "U0NOBODY", "approve", msg)
	s.fake.Wait(t, 10*time.Second, "an ephemeral refusal for a stranger", func() bool {
		return len(s.fake.Ephemerals("U0NOBODY")) == 1
	})
	if st, b := s.call(t, "GET", "/v1/operations/"+o.Key, s.APIKey, ""); st != 200 || len(decode[op](t, b).Approval.Approvals) != 0 {
		t.Fatalf("refused clicks counted: %s", b)
	}

	s.click(t, "U0GRACE", "approve", msg)
	s.waitMessage(t, msg, "1 of 2 approvals", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "1 of 2 approvals") && slackHasButtons(m)
	})

	// Ada approves on the approval page; the Slack message shows it.
	link := s.consoleLink(t, o.Key, "ada")
	if st, page := newBrowser().decide(t, link, "approve", ""); st != 200 {
		t.Fatalf("page: %d\n%s", st, page)
	}
	done := s.waitFor(t, o.Key, "succeeded")
	vias := map[string]string{}
	for _, a := range done.Approval.Approvals {
		vias[a.Approver] = a.Via
	}
	if vias["grace"] != "slack" || vias["ada"] == "" || vias["ada"] == "slack" || len(vias) != 2 {
		t.Fatalf("approvals %v", vias)
	}
	posted := s.fake.Messages(s.fake.ChannelID("#general"))
	if len(posted) != 1 || posted[0].Text != "Release *2.1* is out: <https://example.com/notes|notes>" {
		t.Fatalf("posted %+v", posted)
	}
	cur := s.waitMessage(t, msg, "the message to show success", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "Done")
	})
	if slackHasButtons(cur) || !strings.Contains(cur.AllText(), "Grace Park* via slack") || !strings.Contains(cur.AllText(), "Ada Lovelace* via") {
		t.Fatalf("final message:\n%s", cur.AllText())
	}
}

// An approval on the page alone updates the Slack message.
func TestSlackE2EEmailPageApprovalUpdatesSlack(t *testing.T) {
	s := startSlackService(t, 1, `"slack:#approvals", "console"`)
	o := s.prepareSlack(t, "hello")
	msg := s.approvalMessage(t, o.Key)
	if st, page := newBrowser().decide(t, s.consoleLink(t, o.Key, "grace"), "approve", ""); st != 200 {
		t.Fatalf("page: %d\n%s", st, page)
	}
	s.waitFor(t, o.Key, "succeeded")
	cur := s.waitMessage(t, msg, "the message to show the page approval", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "Approved by *Grace Park*") && strings.Contains(m.AllText(), "Done")
	})
	if slackHasButtons(cur) {
		t.Fatal("buttons left")
	}
}

// Reject through the modal: the agent sees the reason.
func TestSlackE2ERejectWithReason(t *testing.T) {
	s := startSlackService(t, 1, `"slack:#approvals"`)
	o := s.prepareSlack(t, "hello")
	msg := s.approvalMessage(t, o.Key)
	s.click(t, "U0ADA", "reject", msg)
	views := s.fake.WaitCalls(t, "views.open", 1)
	if views[0].Token != "xoxb-e2e" {
		t.Fatal("views.open without the bot token")
	}
	v := s.fake.Views()[0]
	body := fakeslack.FormBody(fakeslack.ViewSubmission(fakeslack.Submission{UserID: "U0ADA", TeamID: "T0FAKE",
		CallbackID: v.CallbackID, PrivateMetadata: v.PrivateMetadata,
		Values: map[string]map[string]string{"reason": {"reason": "Not before the release notes are reviewed."}}}))
	if st, resp := s.interact(t, body, time.Now(), slackTestSecret); st != 200 || resp != "" {
		t.Fatalf("submission: %d %q", st, resp)
	}
	got := s.waitFor(t, o.Key, "rejected")
	if got.Approval.Rejection == nil || got.Approval.Rejection.Reason != "Not before the release notes are reviewed." ||
		got.Approval.Rejection.Approver != "ada" {
		t.Fatalf("rejection %+v", got.Approval.Rejection)
	}
	if !strings.Contains(got.NextStep, "Not before the release notes are reviewed.") {
		t.Fatalf("next step %q", got.NextStep)
	}
	cur := s.waitMessage(t, msg, "the message to show the rejection", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "Rejected by *Ada Lovelace* via slack")
	})
	if slackHasButtons(cur) {
		t.Fatal("buttons left")
	}
	if n := len(s.fake.Messages(s.fake.ChannelID("#general"))); n != 0 {
		t.Fatal("posted anyway")
	}
}

// Bad signatures, old timestamps and altered bodies get 401 through the
// whole HTTP stack; a replayed valid click counts once.
func TestSlackE2ESignaturesAndReplay(t *testing.T) {
	s := startSlackService(t, 2, `"slack:#approvals"`)
	o := s.prepareSlack(t, "hello")
	msg := s.approvalMessage(t, o.Key)
	body := slackClick("U0GRACE", "approve", msg)
	altered := []byte(strings.Replace(string(body), "approve", "reject", 1))
	for name, st := range map[string]func() (int, string){
		"wrong secret":  func() (int, string) { return s.interact(t, body, time.Now(), "wrong") },
		"old timestamp": func() (int, string) { return s.interact(t, body, time.Now().Add(-10*time.Minute), slackTestSecret) },
		"altered body": func() (int, string) {
			req := fakeslack.SignedRequest(s.URL()+"/slack/interactions", slackTestSecret, time.Now(), altered)
			fakeslack.SignHeaders(req.Header, slackTestSecret, time.Now(), body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		},
	} {
		if code, resp := st(); code != 401 {
			t.Errorf("%s: %d %s, want 401", name, code, resp)
		}
	}
	at := time.Now()
	for range 3 {
		if st, resp := s.interact(t, body, at, slackTestSecret); st != 200 {
			t.Fatalf("click: %d %s", st, resp)
		}
	}
	_, b := s.call(t, "GET", "/v1/operations/"+o.Key, s.APIKey, "")
	if got := decode[op](t, b); len(got.Approval.Approvals) != 1 || got.Status != "pending_approval" {
		t.Fatalf("after a replayed click: %s", b)
	}
}

// Slack answers 500 and then 429 to the approval message: delivered later,
// once; the console link of the same operation is printed at once.
func TestSlackE2EOutageDoesNotDelayOtherChannels(t *testing.T) {
	fake := fakeslack.New(t)
	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 500})
	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 429, RetryAfter: 3 * time.Second})
	srv := startService(t, serviceOpts{Config: slackTestConfig(1, `"slack:#approvals", "console"`), Env: map[string]string{
		"SLACK_BOT_TOKEN": "xoxb-e2e", "SLACK_SIGNING_SECRET": slackTestSecret, "COUNTERSIGN_SLACK_API_URL": fake.URL(),
	}})
	s := &slackE2E{testService: srv, fake: fake}
	o := s.prepareSlack(t, "hello")
	s.consoleLink(t, o.Key, "grace")
	linkAt := time.Now()
	if n := fake.Count("chat.postMessage"); n > 2 {
		t.Fatalf("Slack delivered before the console link was printed? calls: %s", fake.Summary())
	}
	msg := s.approvalMessage(t, o.Key)
	calls := fake.Calls("chat.postMessage")
	if len(calls) != 3 || calls[0].Status != 500 || calls[1].Status != 429 || calls[2].Status != 200 {
		t.Fatalf("calls %s", fake.Summary())
	}
	if !linkAt.Before(calls[2].At) {
		t.Fatal("the console link waited for Slack")
	}
	s.click(t, "U0GRACE", "approve", msg)
	s.waitFor(t, o.Key, "succeeded")
	if n := len(fake.Messages(fake.ChannelID("#approvals"))); n != 1 {
		t.Fatalf("%d approval messages", n)
	}
}

// The Slack Web API calls of one operation's life, counted with the fake:
// the approval message, its update, and the action's own post.
func TestSlackE2ECallsPerOperation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		required int
		decide   func(t *testing.T, s *slackE2E, key string, msg fakeslack.Message)
		final    string
		want     map[string]int
	}{
		{"approve", 1, func(t *testing.T, s *slackE2E, _ string, msg fakeslack.Message) {
			s.click(t, "U0GRACE", "approve", msg)
		}, "succeeded", map[string]int{"chat.postMessage": 2, "chat.update": 2}},
		{"approve quorum 2", 2, func(t *testing.T, s *slackE2E, _ string, msg fakeslack.Message) {
			s.click(t, "U0GRACE", "approve", msg)
			s.waitMessage(t, msg, "1 of 2", func(m fakeslack.Message) bool { return m.Updates == 1 })
			s.click(t, "U0ADA", "approve", msg)
		}, "succeeded", map[string]int{"chat.postMessage": 2, "chat.update": 3}},
		{"reject", 1, func(t *testing.T, s *slackE2E, _ string, msg fakeslack.Message) {
			s.click(t, "U0GRACE", "reject", msg)
			s.fake.WaitCalls(t, "views.open", 1)
			v := s.fake.Views()[0]
			s.interact(t, fakeslack.FormBody(fakeslack.ViewSubmission(fakeslack.Submission{UserID: "U0GRACE", TeamID: "T0FAKE",
				CallbackID: v.CallbackID, PrivateMetadata: v.PrivateMetadata,
				Values: map[string]map[string]string{"reason": {"reason": "no"}}})), time.Now(), slackTestSecret)
		}, "rejected", map[string]int{"chat.postMessage": 1, "views.open": 1, "chat.update": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSlackService(t, tc.required, `"slack:#approvals"`)
			s.fake.Reset() // forget auth.test at start: it is per process, not per operation
			o := s.prepareSlack(t, "count me")
			msg := s.approvalMessage(t, o.Key)
			tc.decide(t, s, o.Key, msg)
			s.waitFor(t, o.Key, tc.final)
			s.waitMessage(t, msg, "the final update", func(m fakeslack.Message) bool { return !slackHasButtons(m) })
			time.Sleep(300 * time.Millisecond) // let any stray call land
			got := map[string]int{}
			for _, c := range s.fake.Calls() {
				got[c.Method]++
			}
			t.Logf("Slack Web API calls in one operation's life (%s): %v (total %d)", tc.name, got, len(s.fake.Calls()))
			// The last update may cover an intermediate state a slower worker
			// would have shown (approved, then done): one update fewer is fine,
			// never more, and never a missing final one (checked above).
			if got["chat.update"] == tc.want["chat.update"]-1 && got["chat.update"] > 0 {
				got["chat.update"] = tc.want["chat.update"]
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("calls %v, want %v", got, tc.want)
			}
		})
	}
}

// Half-set credentials, routes that notify slack without credentials,
// and a bad API URL fail the start with a clear message.
func TestSlackConfigErrors(t *testing.T) {
	slackRoute := &config.File{Routes: []config.RouteSpec{{Notify: []string{"slack:#approvals"}}}}
	for _, tc := range []struct {
		name string
		env  map[string]string
		file *config.File
		want string
	}{
		{"token only", map[string]string{"SLACK_BOT_TOKEN": "xoxb"}, &config.File{}, "SLACK_SIGNING_SECRET is not"},
		{"secret only", map[string]string{"SLACK_SIGNING_SECRET": "s"}, &config.File{}, "SLACK_BOT_TOKEN is not"},
		{"route without credentials", nil, slackRoute, "routes notify slack"},
		{"app token only", map[string]string{"SLACK_APP_TOKEN": "xapp-1"}, &config.File{}, "SLACK_APP_TOKEN is set but SLACK_BOT_TOKEN is not"},
		{"bot token as app token", map[string]string{"SLACK_BOT_TOKEN": "xoxb", "SLACK_APP_TOKEN": "xoxb-2"}, slackRoute, "must be an app-level token (xapp-…)"},
		{"bad API URL", map[string]string{"SLACK_BOT_TOKEN": "xoxb", "SLACK_SIGNING_SECRET": "s",
			"COUNTERSIGN_SLACK_API_URL": "ftp://x"}, slackRoute, "COUNTERSIGN_SLACK_API_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Main{Env: func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }}
			err := m.slackEffects(&effects{notifiers: map[string]approval.Notifier{}}, tc.file, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// Nothing set and no Slack route: Slack is simply off.
	m := &Main{Env: func(string) (string, bool) { return "", false }}
	e := &effects{notifiers: map[string]approval.Notifier{}}
	if err := m.slackEffects(e, &config.File{}, true); err != nil || e.notifiers["slack"] != nil || len(e.actions) != 0 {
		t.Fatalf("off: %v %v", err, e.notifiers)
	}
	if got, _ := slackAPIURL("http://127.0.0.1:9/api"); got != "http://127.0.0.1:9/api/" {
		t.Fatalf("api url %q", got)
	}
}
