package email

import (
	"context"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
)

var _ approval.Enroller = (*Notifier)(nil)

// Enrol sends an approver their passkey enrolment link. The link is a
// capability: it appears once in the body and never in an error.
func (nt *Notifier) Enrol(ctx context.Context, n approval.EnrolmentNotice) (string, error) {
	a := n.Approver
	if a == nil || a.Email == "" {
		return "", fmt.Errorf("channel/email: enrolment: the approver has no email address")
	}
	to, err := mail.ParseAddress(a.Email)
	if err != nil {
		return "", fmt.Errorf("channel/email: enrolment: approver %s: email address %q is invalid", a.ID, a.Email)
	}
	to.Name = oneLine(a.Name, 100)
	origin := n.Link
	if i := strings.Index(origin, "/enroll/"); i > 0 {
		origin = origin[:i]
	}
	text := fmt.Sprintf(`Hello %s,

countersign asks you to register a passkey. Some requests that AI agents
prepare need proof that it is really you who approves them: a passkey on
your phone, laptop or security key, confirmed with your PIN, fingerprint
or face.

Register one here (the link works once, until %s, and only on %s):

%s

Opening the link changes nothing; the page asks your device to create the
passkey when you press its button. If you did not expect this, ignore it.
`, oneLine(a.DisplayName(), 100), n.ExpiresAt.UTC().Format(time.RFC1123), origin, n.Link)
	m := &mailer.Message{From: nt.from, To: []mail.Address{*to}, Subject: "Register a passkey for countersign", Text: text,
		Headers: map[string]string{"Auto-Submitted": "auto-generated", "X-Auto-Response-Suppress": "All"}}
	if _, err := nt.sender.Send(ctx, m); err != nil {
		return "", redact(fmt.Errorf("channel/email: enrolment link to approver %s: %w", a.ID, err), n.Link)
	}
	return a.Email, nil
}
