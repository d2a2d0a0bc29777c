package slackapp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/slack/slackapp"
	"github.com/countersign/countersign/internal/testing/fakeslack"
)

// socketClick sends a click by user on a button of m as a Socket Mode
// envelope and returns its acknowledgement.
func (e *env) socketClick(t testing.TB, user, actionID string, m fakeslack.Message, id string) fakeslack.SocketAck {
	t.Helper()
	c := fakeslack.Click{UserID: user, TeamID: "T0FAKE", ActionID: actionID, BlockID: m.ActionBlockID(),
		ChannelID: m.Channel, MessageTS: m.TS}
	if b := m.Button(actionID); b != nil {
		c.Value = b.Value
	}
	return e.socketAck(t, fakeslack.BlockActions(c), id)
}

func (e *env) socketAck(t testing.TB, payload []byte, id string) fakeslack.SocketAck {
	t.Helper()
	before := len(e.fake.Acks(id))
	if id == "" {
		before = 0
	}
	id = e.fake.SocketSend(t, "interactive", payload, id)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if acks := e.fake.Acks(id); len(acks) > before {
			a := acks[len(acks)-1]
			if a.Latency >= 3*time.Second {
				t.Fatalf("envelope %s acknowledged after %s", id, a.Latency)
			}
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("envelope %s not acknowledged", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Socket Mode carries an approval: the click arrives over the socket,
// is acknowledged at once, counts, and the message follows the operation.
func TestSocketModeApproval(t *testing.T) {
	e := newEnv(t, opts{socket: true})
	op := e.prepareSend(t, "Deploy *v3* is live")
	msg := e.approvalMessages(t, op.Key, 1)[0]

	// Without a signing secret, the HTTP endpoint accepts nothing.
	if st, _ := e.post(t, clickRequest(grace, slackapp.ActionApprove, msg, nil), time.Now(), secret); st != 401 {
		t.Fatalf("HTTP click without a signing secret: %d", st)
	}
	// A stranger over the socket: acknowledged, refused privately.
	if a := e.socketClick(t, stranger, slackapp.ActionApprove, msg, ""); a.Payload != nil {
		t.Fatalf("ack payload %s", a.Payload)
	}
	e.ephemeral(t, stranger, "You are not an approver")

	a := e.socketClick(t, grace, slackapp.ActionApprove, msg, "")
	if a.Payload != nil {
		t.Fatalf("ack payload %s", a.Payload)
	}
	done := e.waitStatus(t, op.Key, approval.StatusSucceeded)
	if len(done.Approvals) != 1 || done.Approvals[0].Approver != "grace" || done.Approvals[0].Via != "slack" {
		t.Fatalf("approvals %+v", done.Approvals)
	}
	cur := e.waitMessage(t, msg, "the message to show success", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "Done: it ran successfully")
	})
	if hasButtons(cur) || len(e.fake.Messages(e.fake.ChannelID("#general"))) != 1 {
		t.Fatalf("after success:\n%s", cur.AllText())
	}
	t.Logf("click acknowledged in %s", a.Latency)
}

// Reject opens the modal; its submission comes back over the socket, and
// the form's errors are the acknowledgement's payload.
func TestSocketModeRejectModal(t *testing.T) {
	e := newEnv(t, opts{socket: true})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	e.socketClick(t, ada, slackapp.ActionReject, msg, "")
	e.fake.Wait(t, 10*time.Second, "the reject modal", func() bool { return len(e.fake.Views()) == 1 })
	v := e.fake.Views()[0]
	submit := func(reason string) fakeslack.SocketAck {
		return e.socketAck(t, fakeslack.ViewSubmission(fakeslack.Submission{UserID: ada, TeamID: "T0FAKE", CallbackID: v.CallbackID,
			PrivateMetadata: v.PrivateMetadata, Values: map[string]map[string]string{"reason": {"reason": reason}}}), "")
	}
	if a := submit("  "); !strings.Contains(string(a.Payload), `"response_action":"errors"`) || !strings.Contains(string(a.Payload), "Please say why") {
		t.Fatalf("empty reason acknowledged with %s", a.Payload)
	}
	if a := submit("Not in this channel."); a.Payload != nil {
		t.Fatalf("ack payload %s", a.Payload)
	}
	done := e.waitStatus(t, op.Key, approval.StatusRejected)
	if done.Rejection == nil || done.Rejection.Reason != "Not in this channel." {
		t.Fatalf("rejection %+v", done.Rejection)
	}
}

// Slack redelivers an envelope it saw no ack for, with the same id: it is
// acknowledged again and counts once.
func TestSocketModeRedeliveryCountsOnce(t *testing.T) {
	e := newEnv(t, opts{socket: true, required: 2})
	op := e.prepareSend(t, "twice?")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	e.socketClick(t, grace, slackapp.ActionApprove, msg, "fake-envelope-redelivered")
	e.socketClick(t, grace, slackapp.ActionApprove, msg, "fake-envelope-redelivered")
	if n := len(e.fake.Acks("fake-envelope-redelivered")); n != 2 {
		t.Fatalf("%d acks", n)
	}
	e.waitMessage(t, msg, "1 of 2 approvals", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "1 of 2 approvals")
	})
	time.Sleep(100 * time.Millisecond)
	// The redelivery was ignored, not explained as a second decision.
	if cur := e.get(t, op.Key); len(cur.Approvals) != 1 || len(e.fake.Ephemerals(grace)) != 0 {
		t.Fatalf("approvals %+v, ephemerals %+v", cur.Approvals, e.fake.Ephemerals(grace))
	}
}

// A dropped socket, or Slack asking to reconnect, is reopened; clicks
// then arrive over the new connection.
func TestSocketModeReconnects(t *testing.T) {
	e := newEnv(t, opts{socket: true, required: 2})
	op := e.prepareSend(t, "keep going")
	msg := e.approvalMessages(t, op.Key, 1)[0]

	e.fake.DropSockets()
	e.fake.WaitSocket(t, 2)
	if a := e.socketClick(t, grace, slackapp.ActionApprove, msg, ""); a.Connection != 2 {
		t.Fatalf("acknowledged on connection %d", a.Connection)
	}
	e.fake.SocketSend(t, "disconnect", nil, "")
	e.fake.WaitSocket(t, 3)
	if a := e.socketClick(t, ada, slackapp.ActionApprove, msg, ""); a.Connection != 3 {
		t.Fatalf("acknowledged on connection %d", a.Connection)
	}
	e.waitStatus(t, op.Key, approval.StatusSucceeded)
	if n := e.fake.Count("apps.connections.open"); n != 3 {
		t.Fatalf("apps.connections.open called %d times", n)
	}
	for _, c := range e.fake.Calls("apps.connections.open") {
		if c.Token != e.fake.AppToken {
			t.Fatalf("opened with token %q", c.Token)
		}
	}
}
