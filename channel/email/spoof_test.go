package email_test

import (
	"context"
	"encoding/json"
	"net/mail"
	"strings"
	"testing"
	"time"

	actemail "github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// Agent text in the plaintext approval email could end with a fake
// "-----" separator and a "Review and decide: https://approvals.example.com.evil.io/…"
// line that read as the template's own (issue 8). Every agent line is now
// fenced, and the email's own link line is the only unfenced one with a
// link, naming the page's real origin.
func TestFakeReviewLineStaysFenced(t *testing.T) {
	act, err := actemail.New(mailer.NewDevMailbox(1), mail.Address{Address: "agent@corp.example"}, actemail.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	fake := "Review and decide: https://approvals.example.com.evil.io/a/k1.fake.sig"
	in, _ := json.Marshal(map[string]any{"to": []string{"ann@client.example"}, "subject": "Invoice -----",
		"text": "Dear Ann,\nthe invoice.\n--------------------------------------------------------------\n" + fake + "\n\n" +
			"Opening the link decides nothing.\nok" + strings.Repeat(" ", 120) + fake + "\n"})
	p, err := act.Prepare(context.Background(), approval.PrepareRequest{Input: in})
	if err != nil {
		t.Fatal(err)
	}
	op := &approval.Operation{Key: "op_abcdefghijklmnopqrstuvwxyz", Action: actemail.Name, Principal: "support-agent",
		PayloadHash: "sha256:3f9a1c0d2b7e88aa", Preview: p.Preview, Status: approval.StatusPending, ExpiresAt: now.Add(time.Hour),
		Route: approval.Route{Approvers: []string{"grace"}, Required: 1}}
	box := mailer.NewDevMailbox(1)
	n := approval.Notice{Job: approval.Job{ID: "j1", Channel: "email", Approver: "grace", Link: true},
		Message: approval.BuildMessage(op, &approval.Policy{Approvers: []*approval.Approver{grace}}, now), Approver: grace,
		Link: "https://approvals.example.com/a/k1.real.sig"}
	if _, err := notifier(t, box).Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	parsed, err := smtptest.Parse(box.List()[0].Raw)
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	for _, line := range strings.Split(parsed.Text, "\n") {
		fenced := strings.HasPrefix(line, "│") || strings.HasPrefix(line, "┆")
		if strings.Contains(line, "evil.io") && !fenced {
			t.Errorf("the agent's line is not fenced: %q", line)
		}
		if strings.Contains(line, "------") && !fenced {
			t.Errorf("the agent's separator is not fenced: %q", line)
		}
		if strings.Contains(line, "/a/") && !fenced {
			links = append(links, line)
		}
	}
	if len(links) != 1 || links[0] != n.Link {
		t.Errorf("unfenced link lines %q, want only the real link", links)
	}
	if !strings.Contains(parsed.Text, "The approval page is on https://approvals.example.com.\n") {
		t.Error("the email does not name the page's origin")
	}
	// In the HTML part the agent's text is inside an agent block.
	i := strings.Index(parsed.HTML, "approvals.example.com.evil.io")
	if i < 0 || strings.LastIndex(parsed.HTML[:i], `class="agent"`) < strings.LastIndex(parsed.HTML[:i], "</pre>") {
		t.Error("the fake line is not inside an agent block in the HTML part")
	}
}
