package teamsapp_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/faketeams"
)

// A card that cannot show the operation whole offers no Approve: Review
// brings the clicking approver, alone, a personal approval link.
func TestTooLongCardSendsAPersonalLink(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}})
	var long strings.Builder
	for i := range 600 {
		long.WriteString("Line " + strings.Repeat("x", 30) + " " + string(rune('a'+i%26)) + "\n")
	}
	op := e.prepareSend(t, "Long", long.String())
	g := cardOf(t, e.cards(t, op.Key, 2), grace.ID)
	if got := faketeams.Verbs(&g.Card); !slices.Equal(got, []string{"reject", "review"}) {
		t.Fatalf("verbs %v", got)
	}
	if text := faketeams.Text(&g.Card); !strings.Contains(text, "Too long for one Teams message") || len(g.Raw) > 24000 {
		t.Fatalf("card of %d bytes:\n%s", len(g.Raw), text)
	}
	// An approve forged from the review button's data counts like any
	// click (the hash is the operation's), but nobody is offered one.
	if r := e.click(t, g, "review", stranger, ""); !strings.Contains(faketeams.Text(r.Card), "You are not an approver") || len(faketeams.OpenURLs(r.Card)) != 0 {
		t.Fatalf("stranger got %s", r.Raw)
	}
	r := e.click(t, g, "review", grace, "")
	links := faketeams.OpenURLs(r.Card)
	if len(links) != 1 || !strings.HasPrefix(links[0], "http://countersign.test/a/") ||
		!strings.Contains(faketeams.Text(r.Card), "Your personal approval page shows all of it") {
		t.Fatalf("review answer:\n%s", r.Raw)
	}
	token := links[0][len("http://countersign.test/a/"):]
	v, res, err := e.svc.DecideByLink(bg, token, true, "")
	if err != nil || v.Problem != approval.LinkOK || res.Outcome != approval.DecideApproved || v.Claims.Approver != "grace" {
		t.Fatalf("deciding on the page: %+v %+v %v", v, res, err)
	}
	done := e.waitStatus(t, op.Key, approval.StatusSucceeded)
	if done.Approvals[0].Via != "teams" {
		t.Fatalf("approval via %s", done.Approvals[0].Via)
	}
	e.waitCard(t, g, "the card to show success", func(x faketeams.Activity) bool {
		return !hasButtons(x) && strings.Contains(faketeams.Text(&x.Card), "Done")
	})
}

// An email with an HTML part cannot be shown as its recipient will see
// it: Review, not Approve.
func TestHTMLEmailIsReviewedOnThePage(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}})
	in, _ := json.Marshal(map[string]any{"to": []string{"client@client.example"}, "subject": "Offer",
		"text": "Our offer: 100 EUR.", "html": "<p>Our offer: <b>100 EUR</b>.</p>"})
	op, _, err := e.svc.Prepare(bg, e.agent, approval.PrepareCall{Action: "email.send", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, e.agent, op.Key); err != nil {
		t.Fatal(err)
	}
	g := cardOf(t, e.cards(t, op.Key, 2), grace.ID)
	if got := faketeams.Verbs(&g.Card); !slices.Equal(got, []string{"reject", "review"}) ||
		!strings.Contains(faketeams.Text(&g.Card), "Teams cannot show this request as its recipient will see it") {
		t.Fatalf("verbs %v:\n%s", got, faketeams.Text(&g.Card))
	}
}

// A Teams outage delays only the Teams job: the email goes out at once,
// and the card follows once Teams answers (429 honours Retry-After).
func TestTeamsOutageIsRetriedAndEmailNotDelayed(t *testing.T) {
	e := newEnv(t, opts{})
	e.fake.Fail("send activity", 1, faketeams.Failure{Status: 503})
	e.fake.Fail("send activity", 1, faketeams.Failure{Status: 429, RetryAfter: time.Second})
	start := time.Now()
	op := e.prepareSend(t, "Outage", "Teams is down.")
	e.emailLink(t, "grace@example.com")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("email took %s", d)
	}
	cards := e.cards(t, op.Key, 2)
	if len(cards) != 2 {
		t.Fatalf("%d cards", len(cards))
	}
	var failed, limited int
	for _, c := range e.fake.Calls("send activity") {
		switch c.Status {
		case 503:
			failed++
		case 429:
			limited++
		}
	}
	if failed != 1 || limited != 1 {
		t.Fatalf("calls %s", e.fake.Summary())
	}
	evs, err := e.svc.Events(bg, nil, op.Key)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, ev := range evs {
		if ev.Event == "notify_failed" {
			notes = append(notes, ev.Details["error"].(string))
		}
	}
	slices.Sort(notes)
	if len(notes) != 2 || !strings.Contains(notes[0], "retry after 1s: teams: send activity: HTTP 429") ||
		!strings.Contains(notes[1], "teams: send activity: HTTP 503") {
		t.Fatalf("audited failures %q", notes)
	}
}
