package slackapp_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/slack/slackapp"
	"github.com/countersign/countersign/internal/testing/fakeslack"
)

// An allowance approved in Slack offers its approvers a Revoke button;
// nobody else can use it, and once pressed the allowance approves nothing
// more and the message says so without the button.
func TestRevokeAllowanceFromSlack(t *testing.T) {
	e := newEnv(t, opts{})
	grant, _, err := e.svc.RequestAllowance(bg, e.agent,
		json.RawMessage(`{"action":"slack.post_message","budget":{"count":5},"ttl":"1h","reason":"status updates"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	msg := e.approvalMessages(t, grant.Key, 1)[0]
	if msg.Button(slackapp.ActionRevoke) != nil {
		t.Fatal("a pending allowance offers Revoke")
	}
	e.click(t, grace, slackapp.ActionApprove, msg)
	e.waitStatus(t, grant.Key, approval.StatusSucceeded)
	cur := e.waitMessage(t, msg, "the Revoke button", func(m fakeslack.Message) bool { return m.Button(slackapp.ActionRevoke) != nil })
	if b := cur.Button(slackapp.ActionRevoke); b == nil || !strings.Contains(string(cur.RawBlocks), "Revoke this allowance?") {
		t.Fatalf("no confirmed Revoke button:\n%s", cur.RawBlocks)
	}

	// Within the allowance, a post runs without a human.
	if op := e.prepareSend(t, "build is green"); op.Status == approval.StatusPending {
		t.Fatalf("within the allowance: %s", op.Status)
	}

	// A stranger, and an approver who is not on the allowance, cannot revoke.
	e.click(t, stranger, slackapp.ActionRevoke, cur)
	e.click(t, eve, slackapp.ActionRevoke, cur)
	e.ephemeral(t, eve, "only an approver of this allowance may revoke it")
	e.fake.Wait(t, 5*time.Second, "the stranger's refusal", func() bool { return len(e.fake.Ephemerals(stranger)) == 1 })
	if g := e.get(t, grant.Key); g.RevokedAt != nil {
		t.Fatal("revoked by someone who may not")
	}

	// Ada, an approver of the allowance, revokes it.
	e.click(t, ada, slackapp.ActionRevoke, cur)
	done := e.waitMessage(t, msg, "the message to show the revocation", func(m fakeslack.Message) bool {
		return strings.Contains(m.AllText(), "revoked") && m.Button(slackapp.ActionRevoke) == nil
	})
	if len(e.fake.Ephemerals(ada)) != 0 {
		t.Fatalf("ada's revocation was refused: %+v", e.fake.Ephemerals(ada))
	}
	g := e.get(t, grant.Key)
	if g.RevokedAt == nil {
		t.Fatalf("not revoked; message:\n%s", done.AllText())
	}
	evs, _ := e.svc.Events(bg, e.agent, grant.Key)
	var by string
	for _, ev := range evs {
		if ev.Event == "revoked" {
			by = ev.Actor
		}
	}
	if by != "approver:ada" {
		t.Fatalf("revoked event actor %q", by)
	}
	// The agent's next post goes to people again, and the stale button
	// explains itself.
	if op := e.prepareSend(t, "deploy done"); op.Status != approval.StatusPending {
		t.Fatalf("after the revocation: %s", op.Status)
	}
	e.click(t, grace, slackapp.ActionRevoke, cur)
	e.ephemeral(t, grace, "no longer in force")
}
