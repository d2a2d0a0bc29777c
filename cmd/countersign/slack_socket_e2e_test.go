package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/fakeslack"
)

// Socket Mode carries a Slack approval end to end: the whole service with
// SLACK_BOT_TOKEN and SLACK_APP_TOKEN (no signing secret, no public
// interactions URL) against internal/testing/fakeslack, whose apps.connections.open
// hands out a WebSocket that sends the click and checks the ack.
func TestSlackE2ESocketModeApproval(t *testing.T) {
	fake := fakeslack.New(t)
	fake.Token, fake.AppToken = "xoxb-e2e", "xapp-1-A0FAKE-e2e"
	s := &slackE2E{fake: fake, testService: startService(t, serviceOpts{Config: slackTestConfig(1, `"slack:#approvals"`), Env: map[string]string{
		"SLACK_BOT_TOKEN": fake.Token, "SLACK_APP_TOKEN": fake.AppToken, "COUNTERSIGN_SLACK_API_URL": fake.URL(),
	}})}
	fake.WaitSocket(t, 1)
	o := s.prepareSlack(t, "Shipped over the socket")
	msg := s.approvalMessage(t, o.Key)

	// No signing secret: the HTTP endpoint is not there at all.
	if st, _ := s.interact(t, slackClick("U0GRACE", "approve", msg), time.Now(), slackTestSecret); st != http.StatusNotFound {
		t.Fatalf("POST /slack/interactions: %d", st)
	}
	id := fake.SocketSend(t, "interactive", mustPayloadOf(t, slackClick("U0GRACE", "approve", msg)), "")
	ack := fake.WaitAck(t, id)
	if ack.Latency >= 3*time.Second || ack.Payload != nil {
		t.Fatalf("ack after %s with %s", ack.Latency, ack.Payload)
	}
	done := s.waitFor(t, o.Key, "succeeded")
	if len(done.Approval.Approvals) != 1 || done.Approval.Approvals[0].Via != "slack" {
		t.Fatalf("approvals %+v", done.Approval.Approvals)
	}
	s.waitMessage(t, msg, "the message to show success", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "Done") && !slackHasButtons(m)
	})
	// The socket's ticket URL is a credential of sorts: never logged.
	if strings.Contains(s.Stderr.String(), "fake-ticket") || strings.Contains(s.Stderr.String(), fake.AppToken) {
		t.Fatalf("the log shows the socket URL or the app token:\n%s", s.Stderr.String())
	}
	t.Logf("acknowledged in %s", ack.Latency)
}

// mustPayloadOf takes the payload out of a form-encoded interaction.
func mustPayloadOf(t *testing.T, form []byte) []byte {
	t.Helper()
	v, err := url.ParseQuery(string(form))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(v.Get("payload"))
}
