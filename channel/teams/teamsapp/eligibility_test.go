package teamsapp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/teams/teamscard"
	"github.com/countersign/countersign/internal/testing/faketeams"
)

// Whether a click may count is the domain's rule (approval.Service.
// Eligibility), not the handler's: a Reject without a reason on a step-up
// route (forged from the Review button: the card offers no Reject) is
// refused at once, because only the domain knows a Teams click carries no
// passkey; before, it was asked for a reason it could never use. Review
// still brings the page, where the passkey is asked for.
func TestClickAsksTheDomainRule(t *testing.T) {
	e := newEnv(t, opts{stepUp: true, notify: []string{"teams"}})
	op := e.prepareSend(t, "Merger terms", "Please approve.")
	var g faketeams.Activity
	e.fake.Wait(t, 15*time.Second, "grace's step-up card", func() bool {
		for _, a := range e.fake.Activities() {
			if d := faketeams.FindAction(&a.Card, teamscard.VerbReview); d != nil && d.Data.Operation == op.Key && a.Member == grace.ID {
				g = a
				return true
			}
		}
		return false
	})
	c := e.fake.ClickOn(g, teamscard.VerbReview, grace, "")
	if c.Data["op"] == nil {
		t.Fatalf("a step-up card has no Review: %v", faketeams.Verbs(&g.Card))
	}
	c.Verb = teamscard.VerbReject
	r := e.do(t, e.fake.Invoke(target, c, faketeams.Sign{}))
	if text := faketeams.Text(r.Card); !strings.Contains(text, "This operation needs a passkey and you have none enrolled") {
		t.Fatalf("reject on a step-up route:\n%s", text)
	}
	r = e.click(t, g, teamscard.VerbReview, grace, "")
	if links := faketeams.OpenURLs(r.Card); len(links) != 1 || !strings.HasPrefix(links[0], "http://countersign.test/a/") {
		t.Fatalf("review on a step-up route:\n%s", r.Raw)
	}
	if cur := e.get(t, op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 || cur.Rejection != nil {
		t.Fatalf("a refused click changed the operation: %+v", cur)
	}
}
