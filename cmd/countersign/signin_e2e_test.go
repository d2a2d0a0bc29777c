package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/browsertest"
	"github.com/countersign/countersign/internal/testing/oidctest"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// Sign-in and passkeys in a real headless Chromium, against the whole
// service: a person signs in through an OIDC provider running in-process
// (real RS256 ID tokens), sees their inbox and approves, and the
// operation runs; an approver registers a passkey with Chromium's virtual
// authenticator (user verification on) and approves a step_up: passkey
// route with it, where a plain click is refused.
//
// WebAuthn needs a domain name, so these services are reached as
// http://localhost:PORT (Chromium treats localhost as a secure context).

func signinConfig(issuer, stepUp string) string {
	return fmt.Sprintf(`
principals:
  - id: support-agent
    api_key_sha256: "%s"
    scopes: [email.send]
    on_behalf_of: sam
operators:
  - {id: oncall, api_key_sha256: "%s", email: oncall@example.com}
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com}
  - {id: sam, name: Sam Lee, email: sam@example.com}
routes:
  - name: outbound email
    match: {action: email.send}
    approvers: {ids: [grace, sam]}
    notify: [console]
    forbid_self_approval: true
%s
limits:
  email.send: {max_recipients: 3, allowed_domains: [client.example]}
oidc:
  issuer: %s
  client_id: countersign
  client_secret: ${COUNTERSIGN_OIDC_SECRET}
`, testKeyHash, apiKeyHash(testOperatorKey), stepUp, issuer)
}

// localhostService starts the service on a free port, reached as
// http://localhost:PORT.
func localhostService(t *testing.T, config string, env map[string]string) (*testService, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	base := fmt.Sprintf("http://localhost:%d", port)
	env["COUNTERSIGN_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", port)
	env["COUNTERSIGN_PUBLIC_URL"] = base
	env["COUNTERSIGN_OIDC_SECRET"] = "idp-secret"
	return startService(t, serviceOpts{Config: config, Env: env}), base
}

func TestBrowserSignInInboxApproves(t *testing.T) {
	chromium := browsertest.Start(t)
	idp := oidctest.Start(t, "countersign", "idp-secret")
	smtp := smtptest.Start(t, smtptest.Options{})
	srv, base := localhostService(t, signinConfig(idp.Issuer(), ""), map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()})
	idp.AllowRedirects(base + "/signin/callback")
	idp.SignIn(map[string]any{"sub": "u-grace", "email": "grace@example.com", "email_verified": true, "name": "Grace Park"})
	o := srv.prepareSend(t, emailBody)

	p := chromium.NewPage(t, browsertest.Desktop)
	start := time.Now()
	p.Navigate(base + "/inbox") // → /signin → the provider → /signin/callback → /inbox
	p.WaitFor(`document.title.startsWith("Your inbox")`, 15*time.Second)
	t.Logf("measured: sign-in through OIDC to the inbox in %v (four navigations, one token exchange)", time.Since(start).Round(time.Millisecond))
	if tokens, _ := idp.Counts(); tokens != 1 {
		t.Errorf("%d token exchanges", tokens)
	}
	if !p.Exists("#item-"+o.Key) || !strings.Contains(p.Text(), "Grace Park") {
		t.Fatalf("the inbox does not show %s:\n%s", o.Key, p.Text())
	}
	var cookies struct {
		Cookies []struct {
			Name, Value, SameSite string
			HTTPOnly              bool `json:"httpOnly"`
			Secure                bool
			Expires               float64
		}
	}
	must(t, p.Call("Network.getCookies", map[string]any{"urls": []string{base}}, &cookies))
	var session string
	for _, c := range cookies.Cookies {
		if c.Name == "countersign-session" {
			session = c.Value
			if !c.HTTPOnly || c.SameSite != "Lax" || c.Expires-float64(time.Now().Unix()) > 31*60 {
				t.Errorf("session cookie %+v", c)
			}
		}
	}
	if session == "" {
		t.Fatalf("no session cookie: %+v", cookies)
	}
	if p.Bool(`document.cookie.includes("countersign-session")`) {
		t.Error("the page's script can read the session cookie")
	}

	p.ClickAndWait("#item-" + o.Key + " a.review")
	if !p.Exists("#decide") || p.Exists("script") {
		t.Fatalf("no decision form (or a script on a plain route):\n%s", p.Text())
	}
	p.ClickAndWait("#approve")
	if !strings.Contains(p.Text(), "You approved it.") {
		t.Fatalf("after approve:\n%s", p.Text())
	}
	done := srv.waitFor(t, o.Key, "succeeded")
	if len(done.Approval.Approvals) != 1 || done.Approval.Approvals[0].Via != "inbox" || done.Approval.Approvals[0].Approver != "grace" {
		t.Errorf("approvals %+v", done.Approval.Approvals)
	}
	if n := len(smtp.Messages()); n != 1 {
		t.Errorf("%d emails sent, want 1", n)
	}
	if strings.Contains(srv.Stderr.String(), session) || strings.Contains(srv.Transcript.String(), session) {
		t.Error("the session cookie is in the service's log or an API response")
	}
}

var enrolLinkRE = regexp.MustCompile(`Register a passkey: (http://localhost:\d+/enroll/\S+)`)

func TestBrowserPasskeyStepUp(t *testing.T) {
	chromium := browsertest.Start(t)
	idp := oidctest.Start(t, "countersign", "idp-secret")
	smtp := smtptest.Start(t, smtptest.Options{})
	srv, base := localhostService(t, signinConfig(idp.Issuer(), "    step_up: passkey"), map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()})

	// The operator asks; the link goes to grace (the console channel here), never to the operator.
	code, out, errOut := runCLI(t, map[string]string{"COUNTERSIGN_URL": srv.URL(), "COUNTERSIGN_OPERATOR_KEY": testOperatorKey},
		"approvers", "enroll", "grace")
	if code != 0 || !strings.Contains(out, "printed on the service's console") {
		t.Fatalf("approvers enroll: exit %d\n%s%s", code, out, errOut)
	}
	m := enrolLinkRE.FindStringSubmatch(srv.Stderr.String())
	if m == nil {
		t.Fatalf("no enrolment link printed:\n%s", srv.Stderr.String())
	}
	if strings.Contains(out, strings.TrimPrefix(m[1], base)) || strings.Contains(srv.Transcript.String(), "/enroll/") {
		t.Fatal("the operator got the enrolment link")
	}

	p := chromium.NewPage(t, browsertest.Phone)
	must(t, p.Call("WebAuthn.enable", map[string]any{"enableUI": false}, nil))
	var va struct {
		ID string `json:"authenticatorId"`
	}
	must(t, p.Call("WebAuthn.addVirtualAuthenticator", map[string]any{"options": map[string]any{
		"protocol": "ctap2", "transport": "internal", "hasResidentKey": true,
		"hasUserVerification": true, "isUserVerified": true, "automaticPresenceSimulation": true,
	}}, &va))
	p.Navigate(m[1])
	if !p.Exists("#create") {
		t.Fatalf("enrolment page:\n%s", p.Text())
	}
	start := time.Now()
	p.ClickAndWait("#create")
	t.Logf("measured: passkey registration in Chromium (create, attestation check, store) in %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(p.Text(), "Your passkey is registered") {
		t.Fatalf("after create:\n%s\n%v", p.Text(), p.Logs())
	}
	var creds struct {
		Credentials []struct {
			SignCount int `json:"signCount"`
		} `json:"credentials"`
	}
	must(t, p.Call("WebAuthn.getCredentials", map[string]any{"authenticatorId": va.ID}, &creds))
	if len(creds.Credentials) != 1 {
		t.Fatalf("virtual authenticator holds %d credentials", len(creds.Credentials))
	}

	o := srv.prepareSend(t, emailBody)
	link := srv.consoleLink(t, o.Key, "grace")
	if !strings.HasPrefix(link, base+"/a/") {
		t.Fatalf("link %q", link)
	}
	// A plain click (no script, no passkey) is refused, and so is a chat
	// channel's decision: the service enforces it.
	if st, page := newBrowser().decide(t, link, "approve", ""); st != 403 || !strings.Contains(page, "passkey") {
		t.Fatalf("plain click: %d\n%s", st, page)
	}
	var refusal *approval.Refusal
	if _, _, err := srv.Service.DecideAs(context.Background(), o.Key, "grace", "slack", o.PayloadHash, true, ""); !errors.As(err, &refusal) {
		t.Fatalf("a Slack decision on a step-up route: %v", err)
	}
	if got := srv.waitFor(t, o.Key, "pending_approval"); len(got.Approval.Approvals) != 0 {
		t.Fatal("a refused decision counted")
	}

	p.Navigate(link)
	if !p.Exists(`#decide[data-stepup="passkey"]`) {
		t.Fatalf("the page does not ask for the passkey:\n%s", p.Text())
	}
	start = time.Now()
	p.ClickAndWait("#approve") // the script asks the authenticator, then sends the form
	t.Logf("measured: approval with a passkey in Chromium (get, assertion check, decide) in %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(p.Text(), "You approved it.") {
		t.Fatalf("after approve:\n%s\n%v", p.Text(), p.Logs())
	}
	for _, l := range p.Logs() {
		if strings.Contains(l.Text, "Content Security Policy") {
			t.Errorf("CSP violation: %s", l)
		}
	}
	srv.waitFor(t, o.Key, "succeeded")

	_, b := srv.call(t, "GET", "/v1/admin/operations/"+o.Key, testOperatorKey, "")
	var detail struct {
		Events []approval.Event `json:"events"`
	}
	must(t, json.Unmarshal(b, &detail))
	var names []string
	for _, e := range detail.Events {
		names = append(names, e.Event+"/"+e.Outcome)
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"step_up_refused/missing", "step_up/verified", "approval/", "approved/", "succeeded/"} {
		if !strings.Contains(got, want) {
			t.Errorf("audit %q lacks %s", got, want)
		}
	}
}
