package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/webauthntest"
	"github.com/countersign/countersign/passkey"
)

// enrol sends approver an enrolment link and registers a software passkey
// through the enrolment page, as a browser does.
func (e *signinEnv) enrol(approver string) *webauthntest.Authenticator {
	e.t.Helper()
	t := e.t
	if _, err := e.svc.StartEnrolment(context.Background(), &approval.Operator{ID: "oncall"}, approver); err != nil {
		t.Fatal(err)
	}
	link := e.notes.lastEnrol()
	path := strings.TrimPrefix(link, signinPublicURL)
	if path == link || !strings.HasPrefix(path, "/enroll/") {
		t.Fatalf("enrolment link %q", link)
	}
	p := newPerson()
	page := p.do(t, "GET", e.base+path, nil, nil)
	if page.status != 200 {
		t.Fatalf("enrolment page: %d\n%s", page.status, page.body)
	}
	csrf, _ := formOf(t, page.body)
	auth := webauthntest.New("countersign.test", signinPublicURL)
	r := p.do(t, "POST", e.base+path, url.Values{"_csrf": {csrf},
		"credential": {string(auth.Create(passkey.UserHandle(approver), challengeOf(t, page.body, "options")))}}, nil)
	if r.status != 200 || !strings.Contains(r.body, "Your passkey is registered") {
		t.Fatalf("register: %d\n%s", r.status, r.body)
	}
	return auth
}

// linkOf is approver's approval link path for op.
func (e *signinEnv) linkOf(op *approval.Operation, approver string) string {
	e.t.Helper()
	e.notes.mu.Lock()
	defer e.notes.mu.Unlock()
	for _, l := range e.notes.links {
		tok := strings.TrimPrefix(l, signinPublicURL+"/a/")
		c, err := e.svc.Links().ParseLink(tok)
		if err == nil && c.Operation == op.Key && c.Approver == approver {
			return "/a/" + tok
		}
	}
	e.t.Fatalf("no link for %s on %s", approver, op.Key)
	return ""
}

func lastEvent(evs []approval.Event, name string) *approval.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Event == name {
			return &evs[i]
		}
	}
	return nil
}

func TestEnrolmentLinkRegistersOnePasskey(t *testing.T) {
	e := newSigninEnv(t)
	if _, err := e.svc.StartEnrolment(context.Background(), &approval.Operator{ID: "oncall"}, "grace"); err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(e.notes.lastEnrol(), signinPublicURL)
	p := newPerson()
	for range 2 { // opening it, twice, changes nothing
		if r := p.do(t, "GET", e.base+path, nil, nil); r.status != 200 {
			t.Fatalf("GET: %d", r.status)
		}
	}
	page := p.do(t, "GET", e.base+path, nil, nil)
	assertPageHeaders(t, "enrolment page", page.header)
	csp := page.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'nonce-") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
	if !strings.Contains(page.body, `<script src="/static/countersign.js" nonce="`) || strings.Contains(page.body, "onclick") {
		t.Errorf("the page's script is not the one nonce'd file")
	}
	csrf, _ := formOf(t, page.body)
	ch := challengeOf(t, page.body, "options")
	auth := webauthntest.New("countersign.test", signinPublicURL)
	raw := string(auth.Create(passkey.UserHandle("grace"), ch))
	if r := p.do(t, "POST", e.base+path, url.Values{"credential": {raw}}, nil); r.status != 403 {
		t.Errorf("without CSRF: %d", r.status)
	}
	wrong := webauthntest.New("countersign.test", "https://evil.example")
	if r := p.do(t, "POST", e.base+path, url.Values{"_csrf": {csrf}, "credential": {string(wrong.Create(passkey.UserHandle("grace"), ch))}}, nil); r.status != 400 {
		t.Errorf("a passkey made for another origin: %d", r.status)
	}
	if r := p.do(t, "POST", e.base+path, url.Values{"_csrf": {csrf}, "credential": {raw}}, nil); r.status != 200 {
		t.Fatalf("register: %d\n%s", r.status, r.body)
	}
	if r := p.do(t, "POST", e.base+path, url.Values{"_csrf": {csrf}, "credential": {raw}}, nil); r.status != 404 {
		t.Errorf("the link registered twice: %d", r.status)
	}
	creds, err := e.store.PasskeyCredentials(context.Background(), "grace")
	if err != nil || len(creds) != 1 || string(creds[0].ID) != string(auth.ID) {
		t.Fatalf("stored passkeys: %+v %v", creds, err)
	}
	if strings.Contains(e.log.String(), strings.TrimPrefix(path, "/enroll/")) {
		t.Error("the enrolment link is in the log")
	}
}

func TestStepUpRefusesAPlainClickAndAcceptsThePasskey(t *testing.T) {
	e := newSigninEnv(t)
	auth := e.enrol("grace")
	op := e.pending("billing", "Refund 120 EUR")
	other := e.pending("billing", "Refund 9000 EUR")

	// A chat click carries no assertion: refused in the service, audited.
	_, _, err := e.svc.DecideAs(context.Background(), op.Key, "grace", "slack", op.PayloadHash, true, "")
	var refusal *approval.Refusal
	if !errors.As(err, &refusal) || !strings.Contains(refusal.Reason, "passkey") {
		t.Fatalf("a Slack click on a step-up route: %v", err)
	}
	if ev := lastEvent(e.events(op.Key), "step_up_refused"); ev == nil || ev.Outcome != "missing" || ev.Channel != "slack" {
		t.Errorf("refusal audit %+v", ev)
	}

	p := newPerson()
	link := e.linkOf(op, "grace")
	page := p.do(t, "GET", e.base+link, nil, nil)
	if page.status != 200 || !strings.Contains(page.body, `data-stepup="passkey"`) {
		t.Fatalf("page: %d\n%s", page.status, page.body)
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'nonce-") {
		t.Errorf("CSP %q", csp)
	}
	if got, want := challengeOf(t, page.body, "approve"), approval.DecisionChallenge(op.Key, op.PayloadHash, true, "grace"); string(got) != string(want) {
		t.Fatal("the page asks the passkey to sign something other than this decision")
	}
	csrf, _ := formOf(t, page.body)
	post := func(assertion []byte, decision string) response {
		form := url.Values{"_csrf": {csrf}, "decision": {decision}}
		if assertion != nil {
			form.Set("assertion", string(assertion))
		}
		return p.do(t, "POST", e.base+link, form, nil)
	}
	refused := func(what string, r response, code string) {
		t.Helper()
		if r.status != 403 || !strings.Contains(r.body, "Nothing was recorded") {
			t.Errorf("%s: %d\n%s", what, r.status, r.body)
		}
		if ev := lastEvent(e.events(op.Key), "step_up_refused"); ev == nil || ev.Outcome != code {
			t.Errorf("%s: audit %+v, want outcome %s", what, ev, code)
		}
		if st := e.op(op.Key).Status; st != approval.StatusPending {
			t.Fatalf("%s decided: %s", what, st)
		}
	}
	refused("a plain click", post(nil, "approve"), "missing")
	refused("an assertion for another operation", post(auth.Get(approval.DecisionChallenge(other.Key, other.PayloadHash, true, "grace")), "approve"), "challenge")
	refused("a rejection's assertion used to approve", post(auth.Get(approval.DecisionChallenge(op.Key, op.PayloadHash, false, "grace")), "approve"), "challenge")
	refused("another approver's challenge", post(auth.Get(approval.DecisionChallenge(op.Key, op.PayloadHash, true, "ada")), "approve"), "challenge")
	auth.NoUV = true
	refused("no user verification", post(auth.Get(approval.DecisionChallenge(op.Key, op.PayloadHash, true, "grace")), "approve"), "user_verification")
	auth.NoUV = false

	mine := approval.DecisionChallenge(op.Key, op.PayloadHash, true, "grace")
	r := post(auth.Get(mine), "approve")
	if r.status != 200 || !strings.Contains(r.body, "You approved it.") {
		t.Fatalf("approve with the passkey: %d\n%s", r.status, r.body)
	}
	if st := e.op(op.Key).Status; st != approval.StatusApproved {
		t.Fatalf("status %s", st)
	}
	if ev := lastEvent(e.events(op.Key), "step_up"); ev == nil || ev.Outcome != "verified" || ev.Actor != "approver:grace" {
		t.Errorf("verified audit %+v", ev)
	}

	// The same signature counter again (a clone, or a replay): refused.
	page = p.do(t, "GET", e.base+e.linkOf(other, "grace"), nil, nil)
	csrf, _ = formOf(t, page.body)
	link = e.linkOf(other, "grace")
	op = other
	refused("a sign-count regression", post(auth.Sign(approval.DecisionChallenge(other.Key, other.PayloadHash, true, "grace")), "approve"), "sign_count")
}

// The inbox decides step-up routes too, with the passkey.
func TestInboxStepUp(t *testing.T) {
	e := newSigninEnv(t)
	auth := e.enrol("grace")
	op := e.pending("billing", "Refund 120 EUR")
	p := newPerson()
	e.signIn(p, graceClaims, "")
	page := p.do(t, "GET", e.base+"/inbox/"+op.Key, nil, nil)
	csrf, hash := formOf(t, page.body)
	form := url.Values{"_csrf": {csrf}, "decision": {"reject"}, "payload_hash": {hash}, "reason": {"wrong amount"}}
	if r := p.do(t, "POST", e.base+"/inbox/"+op.Key, form, nil); r.status != 403 {
		t.Fatalf("reject without a passkey: %d", r.status)
	}
	form.Set("assertion", string(auth.Get(challengeOf(t, page.body, "reject"))))
	if r := p.do(t, "POST", e.base+"/inbox/"+op.Key, form, nil); r.status != 200 || !strings.Contains(r.body, "You rejected it.") {
		t.Fatalf("reject with the passkey: %d\n%s", r.status, r.body)
	}
	if got := e.op(op.Key); got.Status != approval.StatusRejected || got.Rejection.Via != "inbox" {
		t.Fatalf("after reject: %s %+v", got.Status, got.Rejection)
	}
}

// Without a passkey enrolled, the page says so and offers no buttons.
func TestStepUpWithoutAPasskey(t *testing.T) {
	e := newSigninEnv(t)
	op := e.pending("billing", "Refund 120 EUR")
	page := newPerson().do(t, "GET", e.base+e.linkOf(op, "ada"), nil, nil)
	if page.status != 200 || !strings.Contains(page.body, "you have none registered yet") || strings.Contains(page.body, `id="approve"`) || strings.Contains(page.body, "<script") {
		t.Fatalf("page without a passkey: %d\n%s", page.status, page.body)
	}
	if r := newPerson().do(t, "GET", e.base+"/enroll/Z3JhY2U.AAAAAAAAAAAAAAAAAAAAAA", nil, nil); r.status != http.StatusNotFound {
		t.Errorf("an unknown enrolment link: %d", r.status)
	}
}
