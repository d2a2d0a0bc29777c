package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
)

var (
	graceClaims  = map[string]any{"sub": "u-grace", "email": "grace@example.com", "email_verified": true, "name": "Grace Park"}
	samClaims    = map[string]any{"sub": "u-sam", "email": "sam@example.com", "email_verified": true}
	oncallClaims = map[string]any{"sub": "u-oncall", "email": "oncall@example.com", "email_verified": true}
)

func TestSignInOpensInboxWithAShortLaxCookie(t *testing.T) {
	e := newSigninEnv(t)
	op := e.pending("calendar", "Move standup ⟨to⟩ 10:00\u202e")
	p := newPerson()
	r := e.signIn(p, graceClaims, "/inbox")
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/inbox" {
		t.Fatalf("callback: %d → %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	var set *http.Cookie
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "__Host-countersign-session" && c.Value != "" {
			set = c
		}
	}
	if set == nil || !set.HttpOnly || !set.Secure || set.SameSite != http.SameSiteLaxMode || set.Path != "/" || set.MaxAge != 600 {
		t.Fatalf("session cookie = %+v", set)
	}
	r = p.do(t, "GET", e.base+"/inbox", nil, nil)
	if r.status != 200 {
		t.Fatalf("inbox: %d %s", r.status, r.body)
	}
	assertPageHeaders(t, "inbox", r.header)
	if !strings.Contains(r.body, `href="/inbox/`+op.Key+`"`) || !strings.Contains(r.body, "Grace Park") {
		t.Fatalf("the inbox does not list %s:\n%s", op.Key, r.body)
	}
	// The agent's text is fenced, and on the operation's page its hidden
	// characters are escaped, exactly as on the approval page.
	if !strings.Contains(r.body, `<div class="agent"><span class="from">From the agent</span>`) || strings.Contains(r.body, "<script") {
		t.Errorf("agent text is not fenced in the inbox:\n%s", r.body)
	}
	r = p.do(t, "GET", e.base+"/inbox/"+op.Key, nil, nil)
	if !strings.Contains(r.body, "⟨U&#43;202E⟩") || strings.Contains(r.body, "\u202e") || !strings.Contains(r.body, `<span class="from">From the agent</span>`) {
		t.Errorf("the inbox page does not escape and fence agent text:\n%s", r.body)
	}
	// Nothing of the session reaches the logs.
	if strings.Contains(e.log.String(), set.Value) {
		t.Error("the session cookie is in the log")
	}
}

func TestInboxDecidesWithThePagesRules(t *testing.T) {
	e := newSigninEnv(t)
	op := e.pending("calendar", "Move standup")
	p := newPerson()
	e.signIn(p, graceClaims, "")
	page := p.do(t, "GET", e.base+"/inbox/"+op.Key, nil, nil)
	if page.status != 200 || !strings.Contains(page.body, `id="decide"`) {
		t.Fatalf("inbox page: %d\n%s", page.status, page.body)
	}
	assertPageHeaders(t, "inbox page", page.header)
	if strings.Contains(page.body, "<script") {
		t.Error("a route without step-up got a script")
	}
	csrf, hash := formOf(t, page.body)
	if hash != op.PayloadHash {
		t.Fatalf("form carries hash %q, want %q", hash, op.PayloadHash)
	}
	post := func(form url.Values, hdr map[string]string) response {
		return p.do(t, "POST", e.base+"/inbox/"+op.Key, form, hdr)
	}
	for name, tc := range map[string]struct {
		form url.Values
		hdr  map[string]string
		want int
	}{
		"no CSRF token":     {url.Values{"decision": {"approve"}, "payload_hash": {hash}}, nil, 403},
		"another form's":    {url.Values{"_csrf": {otherToken(csrf)}, "decision": {"approve"}, "payload_hash": {hash}}, nil, 403},
		"from another site": {url.Values{"_csrf": {csrf}, "decision": {"approve"}, "payload_hash": {hash}}, map[string]string{"Origin": "https://evil.example"}, 403},
		"another payload":   {url.Values{"_csrf": {csrf}, "decision": {"approve"}, "payload_hash": {"sha256:" + strings.Repeat("0", 64)}}, nil, 409},
		"no decision":       {url.Values{"_csrf": {csrf}, "payload_hash": {hash}}, nil, 400},
	} {
		if r := post(tc.form, tc.hdr); r.status != tc.want {
			t.Errorf("%s: %d, want %d\n%s", name, r.status, tc.want, r.body)
		}
	}
	if st := e.op(op.Key).Status; st != approval.StatusPending {
		t.Fatalf("a refused POST decided: %s", st)
	}
	r := post(url.Values{"_csrf": {csrf}, "decision": {"approve"}, "payload_hash": {hash}}, nil)
	if r.status != 200 || !strings.Contains(r.body, "You approved it.") {
		t.Fatalf("approve: %d\n%s", r.status, r.body)
	}
	got := e.op(op.Key)
	if got.Status != approval.StatusApproved || len(got.Approvals) != 1 || got.Approvals[0].Via != "inbox" || got.Approvals[0].Approver != "grace" {
		t.Fatalf("after approve: %s %+v", got.Status, got.Approvals)
	}
	// Twice is once.
	if r := post(url.Values{"_csrf": {csrf}, "decision": {"approve"}, "payload_hash": {hash}}, nil); r.status != 200 || strings.Contains(r.body, "You approved it.") {
		t.Errorf("second approve: %d", r.status)
	}
	// And it is gone from the inbox.
	if r := p.do(t, "GET", e.base+"/inbox", nil, nil); strings.Contains(r.body, op.Key) {
		t.Error("a decided operation is still in the inbox")
	}
}

// Separation of duties holds in the inbox: the human the agent works for
// neither sees nor decides its operations.
func TestInboxSeparationOfDuties(t *testing.T) {
	e := newSigninEnv(t)
	op := e.pending("calendar", "Move standup")
	p := newPerson()
	e.signIn(p, samClaims, "")
	if r := p.do(t, "GET", e.base+"/inbox", nil, nil); r.status != 200 || strings.Contains(r.body, op.Key) {
		t.Fatalf("sam's inbox: %d, lists his agent's operation: %v", r.status, strings.Contains(r.body, op.Key))
	}
	if r := p.do(t, "GET", e.base+"/inbox/"+op.Key, nil, nil); r.status != 404 {
		t.Errorf("sam opens his agent's operation: %d", r.status)
	}
	// Even with a token minted for that form, the service refuses him.
	graceP := newPerson()
	e.signIn(graceP, graceClaims, "")
	csrfOther, _ := formOf(t, graceP.do(t, "GET", e.base+"/inbox/"+op.Key, nil, nil).body)
	r := p.do(t, "POST", e.base+"/inbox/"+op.Key, url.Values{"_csrf": {csrfOther}, "decision": {"approve"}, "payload_hash": {op.PayloadHash}}, nil)
	if r.status != 403 {
		t.Errorf("sam with grace's token: %d", r.status)
	}
	if _, _, err := e.svc.DecideAs(t.Context(), op.Key, "sam", approval.ViaInbox, op.PayloadHash, true, ""); err == nil {
		t.Error("the service let sam approve his own agent's operation")
	}
	if st := e.op(op.Key).Status; st != approval.StatusPending {
		t.Fatalf("status %s", st)
	}
}

// Sign-in is never an agent capability: an API key opens neither the
// inbox nor the console, and no session means no decision.
func TestAgentKeyOpensNoInboxOrConsole(t *testing.T) {
	e := newSigninEnv(t)
	op := e.pending("calendar", "Move standup")
	agent := newPerson()
	bearer := map[string]string{"Authorization": "Bearer " + e.agentKey}
	for _, path := range []string{"/inbox", "/inbox/" + op.Key, "/console", "/console/" + op.Key} {
		r := agent.do(t, "GET", e.base+path, nil, bearer)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/signin?") {
			t.Errorf("GET %s with the agent's key: %d %q", path, r.status, r.header.Get("Location"))
		}
	}
	r := agent.do(t, "POST", e.base+"/inbox/"+op.Key, url.Values{"decision": {"approve"}, "payload_hash": {op.PayloadHash}}, bearer)
	if r.status != 403 {
		t.Errorf("POST with the agent's key: %d", r.status)
	}
	// A forged session cookie is no session.
	agent.jar.SetCookies(nil, []*http.Cookie{{Name: "__Host-countersign-session", Value: strings.Repeat("A", 43)}})
	if r := agent.do(t, "GET", e.base+"/inbox", nil, nil); r.status != http.StatusSeeOther {
		t.Errorf("a forged session: %d", r.status)
	}
	if st := e.op(op.Key).Status; st != approval.StatusPending {
		t.Fatalf("status %s", st)
	}
}

func TestSignInRefusals(t *testing.T) {
	e := newSigninEnv(t)
	t.Run("callback without the browser's state cookie", func(t *testing.T) {
		p := newPerson()
		e.idp.SignIn(graceClaims)
		r := p.do(t, "GET", e.base+"/signin", nil, nil)
		r = p.do(t, "GET", r.header.Get("Location"), nil, nil)
		back, _ := url.Parse(r.header.Get("Location"))
		other := newPerson() // the callback arrives in another browser (login CSRF)
		if r := other.do(t, "GET", e.base+back.Path+"?"+back.RawQuery, nil, nil); r.status != 403 {
			t.Errorf("%d", r.status)
		}
		if other.cookie("__Host-countersign-session") != nil {
			t.Error("a session was started")
		}
	})
	t.Run("a callback replayed", func(t *testing.T) {
		p := newPerson()
		e.idp.SignIn(graceClaims)
		r := p.do(t, "GET", e.base+"/signin", nil, nil)
		state := p.cookie("countersign-signin")
		r = p.do(t, "GET", r.header.Get("Location"), nil, nil)
		back, _ := url.Parse(r.header.Get("Location"))
		if r := p.do(t, "GET", e.base+back.Path+"?"+back.RawQuery, nil, nil); r.status != http.StatusSeeOther {
			t.Fatalf("first: %d", r.status)
		}
		p.jar.SetCookies(nil, []*http.Cookie{state})
		if r := p.do(t, "GET", e.base+back.Path+"?"+back.RawQuery, nil, nil); r.status != 403 {
			t.Errorf("replay: %d", r.status)
		}
	})
	t.Run("someone the policy does not name", func(t *testing.T) {
		p := newPerson()
		r := e.signIn(p, map[string]any{"sub": "u-x", "email": "mallory@example.com"}, "")
		if r.status != 403 || p.cookie("__Host-countersign-session") != nil {
			t.Errorf("%d, cookie %v", r.status, p.cookie("__Host-countersign-session"))
		}
	})
	t.Run("an unverified address", func(t *testing.T) {
		p := newPerson()
		r := e.signIn(p, map[string]any{"sub": "u-g", "email": "grace@example.com", "email_verified": false}, "")
		if r.status != 403 || p.cookie("__Host-countersign-session") != nil {
			t.Errorf("%d", r.status)
		}
	})
	t.Run("an approver is no operator", func(t *testing.T) {
		p := newPerson()
		e.signIn(p, graceClaims, "")
		if r := p.do(t, "GET", e.base+"/console", nil, nil); r.status != 403 {
			t.Errorf("console for an approver: %d", r.status)
		}
	})
	t.Run("sign out ends the session everywhere", func(t *testing.T) {
		p := newPerson()
		e.signIn(p, graceClaims, "")
		c := p.cookie("__Host-countersign-session")
		page := p.do(t, "GET", e.base+"/inbox", nil, nil)
		csrf, _ := formOf(t, page.body)
		if r := p.do(t, "POST", e.base+"/signout", url.Values{"_csrf": {csrf}}, nil); r.status != 200 {
			t.Fatalf("sign out: %d", r.status)
		}
		again := newPerson()
		again.jar.SetCookies(nil, []*http.Cookie{c})
		if r := again.do(t, "GET", e.base+"/inbox", nil, nil); r.status != http.StatusSeeOther {
			t.Errorf("the old cookie still opens the inbox: %d", r.status)
		}
	})
}

func TestConsoleCancelsAndShowsTheAudit(t *testing.T) {
	e := newSigninEnv(t)
	op := e.pending("calendar", "Move standup")
	p := newPerson()
	if r := e.signIn(p, oncallClaims, ""); r.header.Get("Location") != "/console" {
		t.Fatalf("an operator lands on %q", r.header.Get("Location"))
	}
	r := p.do(t, "GET", e.base+"/console?status=pending_approval", nil, nil)
	if r.status != 200 || !strings.Contains(r.body, op.Key) {
		t.Fatalf("console: %d\n%s", r.status, r.body)
	}
	if r := p.do(t, "GET", e.base+"/console?status=succeeded", nil, nil); strings.Contains(r.body, op.Key) {
		t.Error("the status filter shows a pending operation under succeeded")
	}
	r = p.do(t, "GET", e.base+"/console/"+op.Key, nil, nil)
	if r.status != 200 || !strings.Contains(r.body, `id="audit"`) || !strings.Contains(r.body, "principal:agent") || !strings.Contains(r.body, `id="cancel"`) {
		t.Fatalf("console operation: %d\n%s", r.status, r.body)
	}
	if strings.Contains(r.body, `id="decide"`) {
		t.Error("an operator is offered a decision")
	}
	m := csrfField.FindAllStringSubmatch(r.body, -1)
	var cancelToken string
	for _, f := range formAction.FindAllStringSubmatch(r.body, -1) {
		if strings.HasSuffix(f[1], "/cancel") {
			cancelToken = m[0][1]
		}
	}
	if r := p.do(t, "POST", e.base+"/console/"+op.Key+"/cancel", url.Values{"_csrf": {"nope"}}, nil); r.status != 403 {
		t.Errorf("cancel without the token: %d", r.status)
	}
	r = p.do(t, "POST", e.base+"/console/"+op.Key+"/cancel", url.Values{"_csrf": {cancelToken}}, nil)
	if r.status != 200 || !strings.Contains(r.body, "Canceled.") {
		t.Fatalf("cancel: %d\n%s", r.status, r.body)
	}
	if st := e.op(op.Key).Status; st != approval.StatusCanceled {
		t.Fatalf("status %s", st)
	}
	evs := e.events(op.Key)
	if last := evs[len(evs)-1]; last.Event != "canceled" || last.Actor != "operator:oncall" {
		t.Errorf("last event %+v", last)
	}
	if r := p.do(t, "POST", e.base+"/console/"+op.Key+"/cancel", url.Values{"_csrf": {cancelToken}}, nil); r.status != 200 {
		t.Errorf("cancel again: %d", r.status)
	}
}

func TestConsoleReconciles(t *testing.T) {
	e := newSigninEnv(t)
	op := e.pending("calendar", "Move standup")
	ctx := t.Context()
	if _, _, err := e.svc.DecideAs(ctx, op.Key, "grace", "slack", op.PayloadHash, true, ""); err != nil {
		t.Fatal(err)
	}
	now := e.svc.Now()
	// A worker claims it and dies: it stays executing.
	won, _, err := e.store.Claim(ctx, op.Ref(), approval.ClaimTransition{Token: "dead-worker",
		Step: approval.Step{Tx: "tx-claim", Now: now, Event: approval.Event{Time: now, Event: "claimed", Actor: "system", Status: approval.StatusExecuting}}})
	if err != nil || !won {
		t.Fatalf("claim: %v %v", won, err)
	}
	p := newPerson()
	e.signIn(p, oncallClaims, "")
	page := p.do(t, "GET", e.base+"/console/"+op.Key, nil, nil)
	if !strings.Contains(page.body, `id="reconcile"`) || strings.Contains(page.body, `id="cancel"`) {
		t.Fatalf("console page of an executing operation:\n%s", page.body)
	}
	csrf, _ := formOf(t, page.body)
	if r := p.do(t, "POST", e.base+"/console/"+op.Key+"/reconcile", url.Values{"_csrf": {csrf}, "outcome": {"failed"}}, nil); r.status != 400 {
		t.Errorf("reconcile without a note: %d", r.status)
	}
	r := p.do(t, "POST", e.base+"/console/"+op.Key+"/reconcile", url.Values{"_csrf": {csrf}, "outcome": {"failed"}, "note": {"no such event on the calendar"}}, nil)
	if r.status != 200 || !strings.Contains(r.body, "Reconciled as failed") {
		t.Fatalf("reconcile: %d\n%s", r.status, r.body)
	}
	if st := e.op(op.Key).Status; st != approval.StatusFailed {
		t.Fatalf("status %s", st)
	}
	evs := e.events(op.Key)
	if last := evs[len(evs)-1]; last.Event != "reconciled" || last.Actor != "operator:oncall" || last.Details["note"] != "no such event on the calendar" {
		t.Errorf("last event %+v", last)
	}
}

// otherToken is token with its first character changed: a fixed
// replacement would leave one token in 64 unchanged.
func otherToken(token string) string {
	first := "x"
	if token[0] == 'x' {
		first = "y"
	}
	return first + token[1:]
}
