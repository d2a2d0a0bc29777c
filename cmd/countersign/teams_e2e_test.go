package main

// End-to-end tests of Microsoft Teams: the whole service (startService)
// with TEAMS_APP_ID, TEAMS_APP_PASSWORD, TEAMS_TENANT_ID and the
// COUNTERSIGN_TEAMS_*_URL variables pointing at internal/testing/faketeams (a
// login endpoint, OpenID metadata and JWKS signing real RS256 tokens, and
// a Bot Connector), and email through an in-process SMTP server. Clicks
// are signed invoke activities POSTed to /teams/messages; the email
// approval is the approval page, reached through the emailed link.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/faketeams"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

var (
	teamsGrace = faketeams.User{ID: "29:1GraceE2E", AADObjectID: "0f0e0d0c-0000-4000-8000-00000000a001", Name: "Grace Park"}
	teamsAda   = faketeams.User{ID: "29:1AdaE2E", AADObjectID: "0f0e0d0c-0000-4000-8000-00000000a002", Name: "Ada Lovelace"}
)

// teamsConfig routes email.send to grace and ada, one approval needed,
// notified in Teams (1:1 chats) and by email at once.
func teamsConfig() string {
	return fmt.Sprintf(`
principals:
  - id: support-agent
    api_key_sha256: %q
    scopes: [email.send]
    on_behalf_of: sam
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com, teams_user_id: %q}
  - {id: ada, name: Ada Lovelace, email: ada@example.com, teams_user_id: %q}
  - {id: sam, name: Sam Lee, email: sam@example.com, teams_user_id: "29:1SamE2E"}
routes:
  - name: outbound email
    match: {action: email.send}
    approvers: {ids: [grace, ada, sam]}
    required: 1
    notify: [teams, email]
    forbid_self_approval: true
`, testKeyHash, teamsGrace.ID, teamsAda.AADObjectID)
}

type teamsE2E struct {
	*testService
	fake *faketeams.Server
	smtp *smtptest.Server
}

func startTeamsService(t testing.TB) *teamsE2E {
	t.Helper()
	fake := faketeams.New(t)
	smtp := smtptest.Start(t, smtptest.Options{})
	env := fake.Env()
	env["COUNTERSIGN_SMTP_URL"] = smtp.URL()
	srv := startService(t, serviceOpts{Config: teamsConfig(), Env: env})
	return &teamsE2E{testService: srv, fake: fake, smtp: smtp}
}

// card waits for the approval card of key in member's 1:1 chat.
func (s *teamsE2E) card(t testing.TB, key, member string) faketeams.Activity {
	t.Helper()
	return s.fake.WaitActivity(t, "the card of "+key+" to "+member, func(a faketeams.Activity) bool {
		x := faketeams.FindAction(&a.Card, "reject")
		return a.Member == member && x != nil && x.Data.Operation == key
	})
}

var e2eLinkRE = regexp.MustCompile(`https?://\S+/a/[A-Za-z0-9_.-]+`)

// emailLink waits for the approval email about key to addr.
func (s *teamsE2E) emailLink(t testing.TB, key, addr string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range s.smtp.Messages() {
			if len(m.To) != 1 || m.To[0] != addr {
				continue
			}
			p, err := m.Parse()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(p.Text, key) {
				return e2eLinkRE.FindString(p.Text)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no approval email about %s to %s", key, addr)
	return ""
}

// click sends a signed invoke to the service over HTTP.
func (s *teamsE2E) click(t testing.TB, card faketeams.Activity, verb string, u faketeams.User) faketeams.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(s.fake.Invoke(s.URL()+"/teams/messages", s.fake.ClickOn(card, verb, u, ""), faketeams.Sign{}))
	if err != nil {
		t.Error(err)
		return faketeams.Response{}
	}
	defer resp.Body.Close()
	return faketeams.ReadResponse(resp)
}

// An operation notified in Teams and by email at once is approved exactly
// once, from whichever is clicked first, and both views show the outcome:
// every Teams card is edited in place, and the emailed page follows.
func TestTeamsE2EApprovedOnceFromTeamsOrEmail(t *testing.T) {
	s := startTeamsService(t)
	const rounds = 6
	won := map[string]int{}
	var links []string
	for i := range rounds {
		subject := fmt.Sprintf("Invoice %d", i)
		o := s.prepareSend(t, fmt.Sprintf(`{"action":"email.send","input":{"to":["client@client.example"],"subject":%q,"text":"Hello,\nthe invoice is attached.\n"}}`, subject))
		grace, ada := s.card(t, o.Key, teamsGrace.ID), s.card(t, o.Key, teamsAda.AADObjectID)
		// Even rounds: grace in Teams against grace by email (one person,
		// two channels); odd rounds: grace in Teams against ada by email.
		mailer := "grace@example.com"
		if i%2 == 1 {
			mailer = "ada@example.com"
		}
		link := s.emailLink(t, o.Key, mailer)
		links = append(links, link)
		if n := len(s.fake.Activities()); n != 2*(i+1) {
			t.Fatalf("%d cards, want 2 per operation (not to sam)", n)
		}

		b := newBrowser()
		st, page, _ := b.do(t, "GET", link, nil)
		m := csrfRE.FindStringSubmatch(page)
		if st != 200 || m == nil {
			t.Fatalf("open %s: %d", link, st)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var teams faketeams.Response
		var pageStatus int
		var pageBody string
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			teams = s.click(t, grace, "approve", teamsGrace)
		}()
		go func() {
			defer wg.Done()
			<-start
			req, _ := newFormRequest(link, map[string][]string{"_csrf": {m[1]}, "decision": {"approve"}})
			resp, err := b.c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			pageStatus, pageBody = resp.StatusCode, readAll(resp)
		}()
		close(start)
		wg.Wait()

		done := s.waitFor(t, o.Key, "succeeded")
		if len(done.Approval.Approvals) != 1 {
			t.Fatalf("round %d: approvals %+v", i, done.Approval.Approvals)
		}
		via := done.Approval.Approvals[0].Via
		won[via]++
		teamsText := faketeams.Text(teams.Card)
		switch via {
		case "teams":
			if !strings.Contains(teamsText, "Your approval was recorded") || pageStatus != http.StatusConflict {
				t.Fatalf("round %d: Teams won, but Teams said:\n%s\npage %d", i, teamsText, pageStatus)
			}
		case "email":
			if pageStatus != 200 || !strings.Contains(pageBody, "Thank you") ||
				!(strings.Contains(teamsText, "no longer waiting") || strings.Contains(teamsText, "You already approved")) {
				t.Fatalf("round %d: email won, page %d; Teams said:\n%s", i, pageStatus, teamsText)
			}
		default:
			t.Fatalf("round %d: approved via %q", i, via)
		}
		// Both views show the outcome: every card, edited in place...
		for _, c := range []faketeams.Activity{grace, ada} {
			deadline := time.Now().Add(15 * time.Second)
			for {
				cur, _ := s.fake.Activity(c.Conversation, c.ID)
				if strings.Contains(faketeams.Text(&cur.Card), "Done: it ran successfully") && len(faketeams.Verbs(&cur.Card)) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: the card of %s does not show success after %d updates:\n%s\n%s", i, c.Member, cur.Updates, faketeams.Text(&cur.Card), cur.Raw)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		// ...and the emailed page.
		if st, page, _ := newBrowser().do(t, "GET", link, nil); st != http.StatusConflict || !strings.Contains(page, "Done: it ran successfully") {
			t.Fatalf("round %d: the page after success: %d", i, st)
		}
		if n := len(sentTo(s.smtp, "client@client.example")); n != i+1 {
			t.Fatalf("round %d: %d emails to the client, want %d", i, n, i+1)
		}
	}
	t.Logf("first click won: %v", won)
	time.Sleep(300 * time.Millisecond)
	subjects := map[string]int{}
	for _, m := range sentTo(s.smtp, "client@client.example") {
		p, _ := m.Parse()
		subjects[p.Header.Get("Subject")]++
	}
	for i := range rounds {
		if n := subjects[fmt.Sprintf("Invoice %d", i)]; n != 1 {
			t.Fatalf("Invoice %d sent %d times", i, n)
		}
	}
	// The agent's view and the log hold no link (the Teams answers to the
	// clicks carry none either: only Review answers with one).
	assertNoCapabilities(t, links, map[string]string{"log": s.Stderr.String(), "agent": s.Transcript.String()})
	if strings.Contains(s.Stderr.String(), s.fake.Password) {
		t.Fatal("the Teams app password is in the log")
	}
}

// A rejection in Teams ends the operation, shows the reason on every card
// and on the emailed page, and sends nothing.
func TestTeamsE2ERejectWithReason(t *testing.T) {
	s := startTeamsService(t)
	o := s.prepareSend(t, `{"action":"email.send","input":{"to":["client@client.example"],"subject":"Offer","text":"100 EUR"}}`)
	ada := s.card(t, o.Key, teamsAda.AADObjectID)
	link := s.emailLink(t, o.Key, "grace@example.com")
	resp, err := http.DefaultClient.Do(s.fake.Invoke(s.URL()+"/teams/messages", s.fake.ClickOn(ada, "reject", teamsAda, "Too cheap."), faketeams.Sign{}))
	if err != nil {
		t.Fatal(err)
	}
	r := faketeams.ReadResponse(resp)
	resp.Body.Close()
	if !strings.Contains(faketeams.Text(r.Card), "Your rejection was recorded") {
		t.Fatalf("answer %s", r.Raw)
	}
	done := s.waitFor(t, o.Key, "rejected")
	if done.Approval.Rejection == nil || done.Approval.Rejection.Reason != "Too cheap." {
		t.Fatalf("rejection %+v", done.Approval.Rejection)
	}
	s.fake.Wait(t, 15*time.Second, "the card to show the rejection", func() bool {
		cur, _ := s.fake.Activity(ada.Conversation, ada.ID)
		return strings.Contains(faketeams.Text(&cur.Card), "Too cheap.") && len(faketeams.Verbs(&cur.Card)) == 0
	})
	if st, page, _ := newBrowser().do(t, "GET", link, nil); st != http.StatusConflict || !strings.Contains(page, "Too cheap.") {
		t.Fatalf("page: %d", st)
	}
	if n := len(sentTo(s.smtp, "client@client.example")); n != 0 {
		t.Fatalf("sent %d", n)
	}
}

// Without credentials, routes that notify teams stop the start; so does
// half of them, or a bad endpoint.
func TestTeamsE2EConfigurationErrors(t *testing.T) {
	policy := t.TempDir() + "/countersign.yaml"
	must(t, os.WriteFile(policy, []byte(teamsConfig()), 0o600))
	smtp := smtptest.Start(t, smtptest.Options{})
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "routes notify teams, but TEAMS_APP_ID and TEAMS_APP_PASSWORD are not set"},
		{map[string]string{"TEAMS_APP_ID": "x"}, "TEAMS_APP_ID is set but TEAMS_APP_PASSWORD is not"},
		{map[string]string{"TEAMS_APP_PASSWORD": "y"}, "TEAMS_APP_PASSWORD is set but TEAMS_APP_ID is not"},
		{map[string]string{"TEAMS_APP_ID": "x", "TEAMS_APP_PASSWORD": "y", "COUNTERSIGN_TEAMS_API_URL": "ftp://nope"}, "COUNTERSIGN_TEAMS_API_URL must be"},
		{map[string]string{"TEAMS_APP_ID": "x", "TEAMS_APP_PASSWORD": "y", "COUNTERSIGN_TEAMS_OPENID_URL": "nope"}, "COUNTERSIGN_TEAMS_OPENID_URL must be"},
	} {
		tc.env["COUNTERSIGN_SMTP_URL"] = smtp.URL()
		tc.env["COUNTERSIGN_LISTEN"] = "127.0.0.1:0"
		tc.env["COUNTERSIGN_CONFIG"] = policy
		err := (&Main{Env: func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, Stderr: &syncBuffer{}}).openAndClose()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "y\"") {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}
}

func readAll(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
