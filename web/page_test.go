package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
)

// TestOpeningALinkNeverDecides: GET and HEAD of a link, with any query a
// scanner or a crafted link could carry (a valid CSRF token included),
// decide nothing (guarantee 5). The same person's POST then does.
func TestOpeningALinkNeverDecides(t *testing.T) {
	e := newPageEnv(t, pageOpts{})
	op, tokens := e.pending("Retro")
	c := newClient("")
	_, csrf := c.open(t, e, tokens[0])
	if csrf == "" {
		t.Fatal("the page offers no form")
	}
	for _, q := range []string{
		"?decision=approve", "?approve=1", "?decision=approve&_csrf=" + url.QueryEscape(csrf),
		"?decision=reject&reason=x", "?action=approve&confirm=yes", "?approved=true", "?decision=approve&decision=approve",
	} {
		for _, m := range []string{"GET", "HEAD"} {
			r := c.do(t, m, e.base+"/a/"+tokens[0]+q, nil, nil)
			if r.status != http.StatusOK {
				t.Errorf("%s %s: %d", m, q, r.status)
			}
			if cur := e.status(op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 || cur.Rejection != nil {
				t.Fatalf("%s %s decided: %s %+v", m, q, cur.Status, cur.Approvals)
			}
		}
	}
	if e.writes() != 0 {
		t.Fatal("a write reached the target")
	}
	r := c.do(t, "POST", e.base+"/a/"+tokens[0], url.Values{"_csrf": {csrf}, "decision": {"reject"}, "reason": {"no"}}, nil)
	if r.status != http.StatusOK || e.status(op.Key).Status != approval.StatusRejected {
		t.Fatalf("the form's own POST did not decide: %d %s", r.status, e.status(op.Key).Status)
	}
	// The decided page has no button, so it promises none.
	if strings.Contains(r.body, "<form") || strings.Contains(r.body, "when you press a button") || strings.Contains(r.body, "as it will be sent") {
		t.Errorf("the decided page still speaks of a decision to come:\n%s", r.body)
	}
}

// TestDecisionNeedsCSRF: a POST without the token, with a wrong one, with
// another link's, without the cookie, or from another origin, is refused
// and decides nothing; the link stays usable.
func TestDecisionNeedsCSRF(t *testing.T) {
	e := newPageEnv(t, pageOpts{approvers: []string{"grace", "ada"}})
	op, tokens := e.pending("Retro")
	c := newClient("")
	_, csrf := c.open(t, e, tokens[0])
	_, otherCSRF := c.open(t, e, tokens[1]) // same browser, the other approver's link
	if csrf == "" || otherCSRF == "" || csrf == otherCSRF {
		t.Fatalf("tokens %q %q", csrf, otherCSRF)
	}
	noCookie := newClient("")
	link := e.base + "/a/" + tokens[0]
	for _, tc := range []struct {
		name string
		c    *client
		form url.Values
		hdr  map[string]string
	}{
		{"missing token", c, url.Values{"decision": {"approve"}}, nil},
		{"empty token", c, url.Values{"_csrf": {""}, "decision": {"approve"}}, nil},
		{"wrong token", c, url.Values{"_csrf": {strings.Repeat("A", len(csrf))}, "decision": {"approve"}}, nil},
		{"other link's token", c, url.Values{"_csrf": {otherCSRF}, "decision": {"approve"}}, nil},
		{"no cookie", noCookie, url.Values{"_csrf": {csrf}, "decision": {"approve"}}, nil},
		{"token in the query", c, url.Values{"decision": {"approve"}}, map[string]string{"X-Query": csrf}},
		{"cross-origin", c, url.Values{"_csrf": {csrf}, "decision": {"approve"}}, map[string]string{"Origin": "https://evil.example"}},
		{"origin lookalike", c, url.Values{"_csrf": {csrf}, "decision": {"approve"}}, map[string]string{"Origin": pagePublicURL + ".evil.example"}},
	} {
		u := link
		if tc.name == "token in the query" {
			u += "?_csrf=" + url.QueryEscape(csrf)
		}
		r := tc.c.do(t, "POST", u, tc.form, tc.hdr)
		if r.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, r.status)
		}
		assertPageHeaders(t, tc.name, r.header)
		if cur := e.status(op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 {
			t.Fatalf("%s decided: %s %+v", tc.name, cur.Status, cur.Approvals)
		}
	}
	// The page's own origin and the right token decide.
	r := c.do(t, "POST", link, url.Values{"_csrf": {csrf}, "decision": {"approve"}}, map[string]string{"Origin": pagePublicURL})
	if cur := e.status(op.Key); r.status != http.StatusOK || len(cur.Approvals) != 1 {
		t.Fatalf("the right POST: %d %+v", r.status, cur.Approvals)
	}
}

// TestPageHeadersEverywhere: the security headers are on every page under
// /a/: the decision page, every explanation page, the 429 and the 405.
func TestPageHeadersEverywhere(t *testing.T) {
	e := newPageEnv(t, pageOpts{linkFailures: 3})
	_, tokens := e.pending("Retro")
	c := newClient("127.0.0.2")
	checks := []struct {
		name, method, path string
		status             int
	}{
		{"decision page", "GET", "/a/" + tokens[0], 200},
		{"HEAD", "HEAD", "/a/" + tokens[0], 200},
		{"unknown link", "GET", "/a/k.b3BfYWJj.c2ln", 404},
		{"garbage", "GET", "/a/%00%ff", 404},
		{"tampered", "GET", "/a/" + tokens[0][:len(tokens[0])-2] + "AA", 404},
		{"too many failures", "GET", "/a/nope", 429},
		{"no token", "GET", "/a/", 404},
		{"method", "PUT", "/a/" + tokens[0], 404},
		{"bad form", "POST", "/a/" + tokens[0], 403},
	}
	for _, ch := range checks {
		r := c.do(t, ch.method, e.base+ch.path, nil, nil)
		if r.status != ch.status {
			t.Errorf("%s: %d, want %d", ch.name, r.status, ch.status)
		}
		assertPageHeaders(t, ch.name, r.header)
	}
}
