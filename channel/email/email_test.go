package email_test

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"net/mail"
	"strings"
	"testing"
	"time"

	actemail "github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/safetext"
	"github.com/countersign/countersign/channel/email"
	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

const link = "https://countersign.example/a/k1.b3BfYWJjfGdyYWNlfGVtYWlsfDE3OTk5OTk5OTl8bm9uY2U.c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmU"

var (
	from  = mail.Address{Name: "countersign", Address: "approvals@corp.example"}
	grace = &approval.Approver{ID: "grace", Name: "Grace Park", Email: "Grace@Corp.Example", Groups: []string{"owners"}}
	sam   = &approval.Approver{ID: "sam", Name: "Sam Lee", Email: "sam@corp.example"}
	now   = time.Date(2026, 7, 1, 9, 30, 0, 0, time.UTC)
)

// notice builds a realistic notice: an email.send operation prepared by
// the real action, rendered by approval.BuildMessage.
func notice(t *testing.T, approver *approval.Approver) approval.Notice {
	t.Helper()
	act, err := actemail.New(mailer.NewDevMailbox(1), mail.Address{Address: "agent@corp.example"}, actemail.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := act.Prepare(context.Background(), approval.PrepareRequest{Input: json.RawMessage(
		`{"to":["Ann Lee <ann@client.example>"],"bcc":["audit@corp.example"],"subject":"Invoice <March> & more",` +
			`"text":"Dear Ann,\n\nplease find the invoice.\n  Indented & <b>not html</b>\n","html":"<p>Dear Ann,</p>\n<p>Invoice &amp; more</p>"}`)})
	if err != nil {
		t.Fatal(err)
	}
	canon, err := approval.Canonical(p.Input)
	if err != nil {
		t.Fatal(err)
	}
	op := &approval.Operation{
		Key: "op_abcdefghijklmnopqrstuvwxyz", Action: actemail.Name, Principal: "support-agent", OnBehalfOf: "sam",
		Input: canon, PayloadHash: "sha256:3f9a1c0d2b7e88aa00112233445566778899aabbccddeeff0011223344556677",
		Preview: p.Preview, Status: approval.StatusPending, ExpiresAt: now.Add(2 * time.Hour),
		Route: approval.Route{Approvers: []string{"grace", "sam"}, Required: 2},
	}
	op.Preview.Diff = []approval.Change{{Field: "start", Before: json.RawMessage(`"09:00"`), After: json.RawMessage(`"10:00"`)},
		{Field: "room", After: json.RawMessage(`"B2"`)}}
	policy := &approval.Policy{Approvers: []*approval.Approver{grace, sam}}
	return approval.Notice{
		Job:      approval.Job{ID: "j1", Channel: "email", Approver: approver.ID, Link: true},
		Message:  approval.BuildMessage(op, policy, now),
		Approver: approver,
		Link:     link,
	}
}

func notifier(t *testing.T, s mailer.Sender) *email.Notifier {
	t.Helper()
	n, err := email.New(s, from)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func smtpSender(t *testing.T, srv *smtptest.Server) mailer.Sender {
	t.Helper()
	cfg, err := mailer.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	return mailer.NewSMTP(cfg)
}

func TestNotifyDelivers(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{StartTLS: true, Username: "relay", Password: "pw"})
	nt := notifier(t, smtpSender(t, srv))
	n := notice(t, grace)

	handle, err := nt.Notify(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := srv.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := msgs[0]
	if got, want := strings.Join(got.To, ","), "Grace@corp.example"; !strings.EqualFold(got, want) {
		t.Errorf("envelope to = %q, want %q", got, want)
	}
	p, err := got.Parse()
	if err != nil {
		t.Fatal(err)
	}
	to, err := p.Addresses("To")
	if err != nil || len(to) != 1 {
		t.Fatalf("To = %v, %v", to, err)
	}
	if got, want := to[0].Name+" <"+strings.ToLower(to[0].Address)+">", "Grace Park <grace@corp.example>"; got != want {
		t.Errorf("To = %q, want %q", got, want)
	}
	if got, want := p.Subject, "Approval needed: "+n.Message.Title; got != want {
		t.Errorf("Subject = %q, want %q", got, want)
	}
	wantID := "<" + email.MessageID(n.Message.OperationKey, "grace", "corp.example") + ">"
	if got, want := handle["message_id"], wantID; got != want {
		t.Errorf("handle message_id = %q, want %q", got, want)
	}
	if got, want := p.Header.Get("Message-Id"), wantID; got != want {
		t.Errorf("Message-ID = %q, want %q", got, want)
	}
	if got, want := p.Header.Get("X-Countersign-Operation"), n.Message.OperationKey; got != want {
		t.Errorf("X-Countersign-Operation = %q, want %q", got, want)
	}
	if got, want := p.Header.Get("Auto-Submitted"), "auto-generated"; got != want {
		t.Errorf("Auto-Submitted = %q, want %q", got, want)
	}

	// The link is in each body exactly once, and nowhere in the headers.
	if got, want := strings.Count(p.Text, link), 1; got != want {
		t.Errorf("text contains the link %d times, want %d", got, want)
	}
	if got, want := strings.Count(p.HTML, link), 1; got != want {
		t.Errorf("html contains the link %d times, want %d", got, want)
	}
	if !strings.Contains(p.HTML, `href="`+link+`"`) {
		t.Error("html has no button linking to the page")
	}
	header, _, _ := strings.Cut(string(got.Data), "\r\n\r\n")
	if strings.Contains(header, "a/k1.") {
		t.Error("the header carries the link")
	}

	// Every preview field, verbatim, in both parts: fenced line by line in
	// the text part, in an agent block in the HTML part; an HTML body as
	// the text its recipient reads.
	htmlText := html.UnescapeString(p.HTML)
	for _, f := range n.Message.Fields {
		value := f.Value
		if f.HTML != nil {
			value = f.HTML.Text
		}
		if fenced := strings.Join(safetext.FenceLines(value, 76), "\n"); !strings.Contains(p.Text, f.Label) || !strings.Contains(p.Text, fenced) {
			t.Errorf("text lacks field %s = %q", f.Label, fenced)
		}
		if !strings.Contains(htmlText, f.Label) || !strings.Contains(htmlText, value) {
			t.Errorf("html lacks field %s = %q", f.Label, value)
		}
	}
	// Agent-written HTML is shown as source, never rendered.
	if strings.Contains(p.HTML, "<p>Dear Ann,</p>") || strings.Contains(p.HTML, "<b>not html</b>") {
		t.Error("html part renders agent-supplied markup")
	}
	facts := []string{
		n.Message.Title, "support-agent", "on behalf of Sam Lee", "sha256:3f9a1c0d2b7e",
		"Wed 1 Jul 2026 11:30 UTC", "Irreversible", "hidden (Bcc)", "decides nothing", "Approve", "Reject",
		n.Message.OperationKey, "2 people must approve", "start", `"09:00"`, `"10:00"`, "(absent)", `"B2"`,
	}
	for _, s := range facts {
		if !strings.Contains(p.Text, s) {
			t.Errorf("text lacks %q", s)
		}
		if !strings.Contains(htmlText, s) {
			t.Errorf("html lacks %q", s)
		}
	}
	if strings.Contains(p.Text, "sha256:3f9a1c0d2b7e88") {
		t.Error("text shows more than the payload hash prefix")
	}
	// Phone-friendly: a viewport and a big button.
	for _, s := range []string{`name="viewport"`, "Review and decide", "max-width:600px"} {
		if !strings.Contains(p.HTML, s) {
			t.Errorf("html lacks %q", s)
		}
	}
}

func TestRedeliverySameMessageID(t *testing.T) {
	box := mailer.NewDevMailbox(10)
	nt := notifier(t, box)
	first, err := nt.Notify(context.Background(), notice(t, grace))
	if err != nil {
		t.Fatal(err)
	}
	again, err := nt.Notify(context.Background(), notice(t, grace))
	if err != nil {
		t.Fatal(err)
	}
	other, err := nt.Notify(context.Background(), notice(t, sam))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := again["message_id"], first["message_id"]; got != want {
		t.Errorf("redelivery message_id = %q, want %q", got, want)
	}
	if other["message_id"] == first["message_id"] {
		t.Errorf("two approvers share message_id %q", first["message_id"])
	}
	list := box.List()
	if got, want := list[0].Header.Get("Message-Id"), other["message_id"]; got != want {
		t.Errorf("sent Message-ID = %q, want %q", got, want)
	}
}

func TestNotifyErrorsNeverContainTheLink(t *testing.T) {
	noEmail := *grace
	noEmail.Email = ""
	badEmail := *grace
	badEmail.Email = "not an address " + link
	tests := []struct {
		name    string
		fail    smtptest.Fail
		modify  func(n *approval.Notice)
		unknown bool
		smtp    bool // the error comes from the SMTP conversation
	}{
		{name: "recipient refused", fail: smtptest.Fail{RejectRcpt: []string{"grace@corp.example"}}, smtp: true},
		{name: "message refused", fail: smtptest.Fail{DataReply: 554}, smtp: true},
		{name: "dropped after data", fail: smtptest.Fail{DropAfterData: true}, unknown: true, smtp: true},
		{name: "no approver", modify: func(n *approval.Notice) { n.Approver = nil }},
		{name: "approver without email", modify: func(n *approval.Notice) { n.Approver = &noEmail }},
		{name: "approver with bad email", modify: func(n *approval.Notice) { n.Approver = &badEmail }},
		{name: "bad operation key", modify: func(n *approval.Notice) { n.Message.OperationKey = "op_" + link }},
		{name: "not an http link", modify: func(n *approval.Notice) { n.Link = "javascript:alert(1)//" + link }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := smtptest.Start(t, smtptest.Options{Fail: tt.fail})
			nt := notifier(t, smtpSender(t, srv))
			n := notice(t, grace)
			if tt.modify != nil {
				tt.modify(&n)
			}
			handle, err := nt.Notify(context.Background(), n)
			if err == nil {
				t.Fatalf("Notify succeeded with handle %v, want an error", handle)
			}
			for e := err; e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), link) || strings.Contains(e.Error(), "a/k1.") {
					t.Fatalf("error %q contains the link", e)
				}
			}
			var se *mailer.SendError
			if got, want := errors.As(err, &se), tt.smtp; got != want {
				t.Fatalf("errors.As(*mailer.SendError) = %v, want %v (%v)", got, want, err)
			}
			if got, want := mailer.OutcomeUnknown(err) && tt.smtp, tt.unknown; got != want {
				t.Errorf("outcome unknown = %v, want %v", got, want)
			}
			if !tt.smtp && len(srv.Messages()) != 0 {
				t.Error("a message was sent")
			}
		})
	}
}

func TestNotifyWithoutLink(t *testing.T) {
	box := mailer.NewDevMailbox(1)
	nt := notifier(t, box)
	n := notice(t, grace)
	n.Link = ""
	if _, err := nt.Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	p, err := smtptest.Parse(box.List()[0].Raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{p.Text, p.HTML} {
		if strings.Contains(body, "/a/") || strings.Contains(body, "Review and decide") {
			t.Error("a message without a link offers one")
		}
		if !strings.Contains(body, "no approval link") {
			t.Error("a message without a link does not say so")
		}
	}
}

func TestSubjectIsOneLine(t *testing.T) {
	box := mailer.NewDevMailbox(1)
	nt := notifier(t, box)
	n := notice(t, grace)
	n.Message.Title = "Send\r\nBcc: evil@x.example\t" + strings.Repeat("long ", 60)
	if _, err := nt.Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	subject := box.List()[0].Message.Subject
	if strings.ContainsAny(subject, "\r\n\t") {
		t.Errorf("subject %q spans lines", subject)
	}
	// Line breaks and tabs are shown, as everywhere, as visible escapes.
	if !strings.HasPrefix(subject, "Approval needed: Send⟨U+000D⟩⟨U+000A⟩Bcc: evil@x.example⟨U+0009⟩long long") {
		t.Errorf("subject = %q", subject)
	}
	if got, max := len([]rune(subject)), len("Approval needed: ")+150; got > max {
		t.Errorf("subject has %d characters, want at most %d", got, max)
	}
}

func TestNewChecks(t *testing.T) {
	if _, err := email.New(nil, from); err == nil {
		t.Error("New without sender succeeded")
	}
	if _, err := email.New(mailer.NewDevMailbox(1), mail.Address{Address: "nobody"}); err == nil {
		t.Error("New with an invalid from succeeded")
	}
}
