package slackapp_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/slack/slackapp"
	"github.com/countersign/countersign/internal/testing/fakeslack"
)

// Tests written for the survivors of the mutation run of issue 19 (see
// docs/mutation.md, "Web and chat adapters").

// withoutTeam is a click's form body whose payload has no team object, as
// some Slack surfaces send it: the workspace is then only the user's
// team_id.
func withoutTeam(t *testing.T, user, actionID string, m fakeslack.Message, userTeam string) []byte {
	t.Helper()
	var payload map[string]any
	if err := json.Unmarshal(fakeslack.BlockActions(fakeslack.Click{UserID: user, TeamID: userTeam, ActionID: actionID,
		BlockID: m.ActionBlockID(), Value: m.Button(actionID).Value, ChannelID: m.Channel, MessageTS: m.TS}), &payload); err != nil {
		t.Fatal(err)
	}
	delete(payload, "team")
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return fakeslack.FormBody(b)
}

// Guarantee 6: without a team object, the clicking user's team decides the
// workspace; the right one counts, another is refused and changes nothing.
func TestMutantsWorkspaceFromTheUsersTeam(t *testing.T) {
	e := newEnv(t, opts{})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]

	if st, body := e.post(t, withoutTeam(t, grace, slackapp.ActionApprove, msg, "T0OTHER"), time.Now(), secret); st != 200 {
		t.Fatalf("click: %d %s", st, body)
	}
	e.ephemeral(t, grace, "not the one countersign is set up for")
	if cur := e.get(t, op.Key); len(cur.Approvals) != 0 {
		t.Fatalf("a click from another workspace counted: %+v", cur.Approvals)
	}

	if st, body := e.post(t, withoutTeam(t, grace, slackapp.ActionApprove, msg, "T0FAKE"), time.Now(), secret); st != 200 {
		t.Fatalf("click: %d %s", st, body)
	}
	done := e.waitStatus(t, op.Key, approval.StatusSucceeded)
	if len(done.Approvals) != 1 || done.Approvals[0].Approver != "grace" {
		t.Fatalf("approvals = %+v", done.Approvals)
	}
}

// syncBuffer is a log sink the handler's background calls may write to
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// A refusal that Slack did not deliver is logged (the refused user saw
// nothing, and nothing changed); one that was delivered is not.
func TestMutantsUndeliveredRefusalIsLogged(t *testing.T) {
	var logs syncBuffer
	e := newEnv(t, opts{logger: slog.New(slog.NewTextHandler(&logs, nil))})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	const warn = "slack: could not send an ephemeral message"

	e.click(t, stranger, slackapp.ActionApprove, msg)
	e.ephemeral(t, stranger, "You are not an approver")
	e.handler.Close()
	if strings.Contains(logs.String(), warn) {
		t.Fatalf("a delivered refusal was logged as undelivered:\n%s", logs.String())
	}

	e.fake.Fail("chat.postEphemeral", 1, fakeslack.Failure{Error: "channel_not_found"})
	e.click(t, stranger, slackapp.ActionReject, msg)
	e.fake.Wait(t, 10*time.Second, "the undelivered refusal to be logged", func() bool {
		return strings.Contains(logs.String(), warn)
	})
	if cur := e.get(t, op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 || cur.Rejection != nil {
		t.Fatalf("operation changed: %s", cur.Status)
	}
}

// New refuses a configuration without its service, client or replay store.
func TestMutantsNewRequiresItsParts(t *testing.T) {
	if h, err := slackapp.New(slackapp.Config{}); err == nil || h != nil {
		t.Fatalf("New without service, client and replay store: %v, %v", h, err)
	}
}

// Guarantee 10: a signed payload nested deeper than 32 is refused as
// invalid_input before it is decoded, and nothing is done.
func TestMutantsDeepPayloadIsRefused(t *testing.T) {
	e := newEnv(t, opts{})
	payload := `{"type":"block_actions","user":{"id":"U0GRACE"},"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`
	st, body := e.post(t, fakeslack.FormBody([]byte(payload)), time.Now(), secret)
	if st != 400 || !strings.Contains(body, "invalid_input") {
		t.Fatalf("status %d %s, want 400 invalid_input", st, body)
	}
}
