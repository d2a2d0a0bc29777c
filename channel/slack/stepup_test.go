package slack_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/slack"
)

// A step-up route's message decides nothing in Slack: its only button is
// Review, which opens the approver's page, where the passkey is asked for.
func TestRenderStepUpOffersOnlyReview(t *testing.T) {
	m := message(approval.StatusPending)
	m.StepUp = approval.StepUpPasskey
	_, blocks, whole := slack.RenderWhole(m)
	raw, _ := json.Marshal(blocks)
	s := string(raw)
	if whole || !strings.Contains(s, `"action_id":"`+slack.ActionReview+`"`) {
		t.Fatalf("no Review button:\n%s", s)
	}
	for _, id := range []string{slack.ActionApprove, slack.ActionReject} {
		if strings.Contains(s, `"action_id":"`+id+`"`) {
			t.Errorf("a step-up message carries %s", id)
		}
	}
	if !strings.Contains(s, "needs a passkey") {
		t.Error("the message does not say why")
	}
}
