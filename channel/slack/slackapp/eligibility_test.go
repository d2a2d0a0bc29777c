package slackapp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/slack/slackapp"
	"github.com/countersign/countersign/internal/testing/fakeslack"
)

// Whether a click may count is the domain's rule (approval.Service.
// Eligibility), not the handler's: a Reject click on a step-up route (a
// stale or forged button: its message offers only Review) is refused
// before any modal opens, because only the domain knows a chat click
// carries no passkey; Review on the same operation still brings the page,
// where the passkey is asked for.
func TestClickAsksTheDomainRule(t *testing.T) {
	e := newEnv(t, opts{stepUp: true, notify: []string{"slack:#approvals"}})
	op := e.prepareSend(t, "hello")
	msg := e.approvalMessages(t, op.Key, 1)[0]
	review := msg.Button(slackapp.ActionReview)
	if review == nil || msg.Button(slackapp.ActionReject) != nil {
		t.Fatal("a step-up message offers Reject, or no Review")
	}
	body := clickRequest(grace, slackapp.ActionReject, msg, func(c *fakeslack.Click) { c.Value = review.Value })
	if st, resp := e.post(t, body, time.Now(), secret); st != 200 {
		t.Fatalf("click: %d %s", st, resp)
	}
	e.ephemeral(t, grace, "This operation needs a passkey and you have none enrolled")
	if n := e.fake.Count("views.open"); n != 0 {
		t.Fatalf("%d modals opened for a click the rule refuses", n)
	}
	e.click(t, grace, slackapp.ActionReview, msg)
	got := e.ephemeral(t, grace, "needs your passkey")
	if !strings.Contains(got.Text, "http://countersign.test/a/") {
		t.Fatalf("no personal link: %q", got.Text)
	}
	if cur := e.get(t, op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 || cur.Rejection != nil {
		t.Fatalf("a refused click changed the operation: %+v", cur)
	}
}
