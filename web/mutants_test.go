package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
)

// Tests written for the survivors of the mutation run of issue 19 (see
// docs/mutation.md, "Web and chat adapters").

// Guarantee 5: opening the link of an operation another approver has
// decided decides nothing and says it is no longer waiting; only a stale
// target is explained as a change of the target. Only a pending page
// gives a deadline to decide by.
func TestMutantsFinishedLinkIsNotCalledStale(t *testing.T) {
	e := newPageEnv(t, pageOpts{approvers: []string{"grace", "ada"}})
	op, tokens := e.pending("Standup")
	if r, _ := newClient("").open(t, e, tokens[0]); r.status != 200 || !strings.Contains(r.body, "Decide within") {
		t.Fatalf("a pending page without its deadline: %d\n%s", r.status, r.body)
	}
	if _, _, err := e.svc.DecideAs(context.Background(), op.Key, "ada", "test", op.PayloadHash, false, "not now"); err != nil {
		t.Fatal(err)
	}
	r, csrf := newClient("").open(t, e, tokens[0])
	if r.status != 409 || csrf != "" || !(strings.Contains(r.body, "This request is no longer waiting for a decision") ||
		// the links of a decided operation are retired in the background:
		// the page may already call grace's link used
		strings.Contains(r.body, "Your decision is recorded")) ||
		strings.Contains(r.body, "would change has changed") || strings.Contains(r.body, "Decide within") {
		t.Fatalf("grace's link after ada's rejection: %d\n%s", r.status, r.body)
	}
	if cur := e.status(op.Key); cur.Status != approval.StatusRejected || len(cur.Approvals) != 0 {
		t.Fatalf("status %s, approvals %+v", cur.Status, cur.Approvals)
	}
}

// Revoking from a page works only on an allowance's link: the link of an
// ordinary operation, with a valid CSRF token, shows its page again and
// changes nothing.
func TestMutantsRevokeOnlyAnAllowance(t *testing.T) {
	e := newPageEnv(t, pageOpts{})
	op, tokens := e.pending("Standup")
	c := newClient("")
	_, csrf := c.open(t, e, tokens[0])
	if csrf == "" {
		t.Fatal("no CSRF token on the page")
	}
	r := c.do(t, "POST", e.base+"/a/"+tokens[0]+"/revoke", url.Values{"_csrf": {csrf}}, nil)
	if r.status != 200 || !strings.Contains(r.body, "Approve this action?") || strings.Contains(r.body, "revoked") {
		t.Fatalf("revoke on an ordinary link: %d\n%s", r.status, r.body)
	}
	if cur := e.status(op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 {
		t.Fatalf("status %s", cur.Status)
	}
}
