// Package email is the email channel: one approval request per approver,
// with the exact preview the agent saw and a link to the approval page.
//
// The link is a capability. It appears once in each body, and never in a
// log line, an error or a header.
package email

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	texttemplate "text/template"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/safetext"
	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/templates"
)

// Template names in package templates.
const (
	textTemplate = "email_approval.txt.tmpl"
	htmlTemplate = "email_approval.html.tmpl"
)

// Notifier sends approval request emails.
type Notifier struct {
	sender mailer.Sender
	from   mail.Address
	text   *texttemplate.Template
	html   *htmltemplate.Template
}

var _ approval.Notifier = (*Notifier)(nil)

// New returns a notifier sending through sender as from. It parses the
// templates now, so a missing or broken template stops the start.
func New(sender mailer.Sender, from mail.Address) (*Notifier, error) {
	if sender == nil {
		return nil, errors.New("channel/email: no sender")
	}
	if _, err := mail.ParseAddress(from.String()); err != nil {
		return nil, fmt.Errorf("channel/email: from address %q is invalid", from.Address)
	}
	tt, err := templates.Text()
	if err != nil {
		return nil, fmt.Errorf("channel/email: text templates: %w", err)
	}
	ht, err := templates.HTML()
	if err != nil {
		return nil, fmt.Errorf("channel/email: html templates: %w", err)
	}
	n := &Notifier{sender: sender, from: from, text: tt.Lookup(textTemplate), html: ht.Lookup(htmlTemplate)}
	if n.text == nil || n.html == nil {
		return nil, fmt.Errorf("channel/email: templates %s and %s are required", textTemplate, htmlTemplate)
	}
	return n, nil
}

// MessageID is the Message-ID (without angle brackets) of the request
// email for one approver of one operation, at the domain of countersign's
// sender. Redelivering the same notice produces the same id, so mail
// clients show it once.
func MessageID(opKey, approverID, senderDomain string) string {
	sum := sha256.Sum256([]byte(approverID))
	return opKey + ".approval." + hex.EncodeToString(sum[:8]) + "@" + senderDomain
}

// Notify sends one approval request to n.Approver.Email and returns the
// handle {"message_id": "<…>"}. Errors name the operation and approver,
// never the link; a *mailer.SendError inside says whether it may have
// been delivered (a retry then carries the same Message-ID).
func (nt *Notifier) Notify(ctx context.Context, n approval.Notice) (map[string]string, error) {
	m, err := nt.build(n)
	if err != nil {
		return nil, redact(err, n.Link)
	}
	if _, err := nt.sender.Send(ctx, m); err != nil {
		return nil, redact(fmt.Errorf("channel/email: %s to approver %s: %w", n.Message.OperationKey, n.Approver.ID, err), n.Link)
	}
	return map[string]string{"message_id": "<" + m.MessageID + ">"}, nil
}

// build renders the email of a notice.
func (nt *Notifier) build(n approval.Notice) (*mailer.Message, error) {
	op := n.Message.OperationKey
	if !approval.ValidOperationKey(op) {
		return nil, errors.New("channel/email: notice has no valid operation key")
	}
	a := n.Approver
	if a == nil {
		return nil, fmt.Errorf("channel/email: %s: email notices go to one approver, and this one has none", op)
	}
	if a.Email == "" {
		return nil, fmt.Errorf("channel/email: %s: approver %s has no email address", op, a.ID)
	}
	to, err := mail.ParseAddress(a.Email)
	if err != nil {
		return nil, fmt.Errorf("channel/email: %s: approver %s: email address %q is invalid", op, a.ID, a.Email)
	}
	to.Name = oneLine(a.Name, 100)
	if n.Link != "" && !strings.HasPrefix(n.Link, "https://") && !strings.HasPrefix(n.Link, "http://") {
		return nil, fmt.Errorf("channel/email: %s: the approval link is not an http(s) URL", op)
	}

	v := newView(n)
	var text, html bytes.Buffer
	if err := nt.text.Execute(&text, v); err != nil {
		return nil, fmt.Errorf("channel/email: %s: text template: %w", op, err)
	}
	if err := nt.html.Execute(&html, v); err != nil {
		return nil, fmt.Errorf("channel/email: %s: html template: %w", op, err)
	}
	msg := &mailer.Message{
		From:      nt.from,
		To:        []mail.Address{*to},
		Subject:   "Approval needed: " + oneLine(safetext.Line(n.Message.Title), 150),
		Text:      text.String(),
		HTML:      html.String(),
		MessageID: MessageID(op, a.ID, domainOf(nt.from.Address)),
		Headers: map[string]string{
			"X-Countersign-Operation":  op,
			"Auto-Submitted":           "auto-generated", // RFC 3834: no auto-replies
			"X-Auto-Response-Suppress": "All",
		},
	}
	if v.Reminder > 0 {
		// A message of its own (a reused Message-ID would be dropped as a
		// duplicate), in the thread of the first.
		first := msg.MessageID
		msg.MessageID = MessageID(op, a.ID+"#r"+strconv.Itoa(v.Reminder), domainOf(nt.from.Address))
		msg.Subject = "Reminder: " + msg.Subject
		msg.Headers["In-Reply-To"], msg.Headers["References"] = "<"+first+">", "<"+first+">"
	}
	return msg, nil
}

// domainOf is the lowercased domain of an address.
func domainOf(addr string) string { return strings.ToLower(addr[strings.LastIndexByte(addr, '@')+1:]) }

// redact removes the link from an error's text. The result does not wrap
// err when it had to change anything, so the link cannot leak through
// Unwrap either.
func redact(err error, link string) error {
	if link == "" || !strings.Contains(err.Error(), link) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), link, "[approval link]"))
}

// oneLine makes s safe for a header: control characters become spaces,
// runs of spaces collapse, and it is cut to max characters.
func oneLine(s string, max int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max-1]) + "…"
	}
	return s
}

// view is the data of the email templates. Every string that carries
// agent text comes fenced: Fenced strings are the text part's lines, each
// starting with safetext.Fence; the HTML template puts the plain values in
// its visibly separate agent block.
type view struct {
	Approver     string
	Title        string
	Summary      string
	Head         string // Title and Summary, fenced
	Fields       []field
	Diff         []change
	Warnings     []string
	Requester    string
	OnBehalfOf   string
	OperationKey string
	Action       string
	ShortHash    string
	ExpiresAt    time.Time
	Required     int
	Link         string
	// Origin is where the approval page is (scheme://host of Link): the
	// template names it in its own words, so a look-alike link in the
	// agent's text is told apart.
	Origin string
	// Reminder is the reminder's number (0 for the first request).
	Reminder int
	// Escalated names the approvers added because nobody decided in time.
	Escalated []string
}

type field struct {
	approval.ShownField
	// Fenced is the value as fenced text lines.
	Fenced string
	// HTMLText and HTMLLinks show an HTML part in channels that cannot
	// render it: its visible text and its links, fenced.
	HTMLText, HTMLLinks string
	Links               []htmlLink
	Remote              []string
}

type htmlLink struct {
	N          int
	Text, Href string
}

type change struct{ Field, Before, After, Fenced string }

// textWidth is where the text part wraps agent lines, so that no agent
// text starts a line however a mail program wraps long ones.
const textWidth = 76

// warningText spells out the stable warning tokens actions use.
var warningText = map[string]string{
	"irreversible":    "Irreversible: once it runs, it cannot be undone.",
	"not_state_bound": "Not checked against the target's current state before it runs.",
	"no_etag":         "The target gives no ETag: a change in the last instant before the write cannot be refused.",
	"diff_truncated":  "The list of changes is cut short; the approval page shows the whole request.",
}

func newView(n approval.Notice) view {
	m := n.Message
	v := view{
		Title: m.Title, Summary: m.Summary, Requester: m.Requester, OnBehalfOf: m.OnBehalfOf,
		OperationKey: m.OperationKey, Action: m.Action, ShortHash: m.ShortHash(),
		ExpiresAt: m.ExpiresAt, Required: m.Required, Link: n.Link, Origin: origin(n.Link), Escalated: m.Escalated,
	}
	if n.FollowUp != nil {
		v.Reminder = n.FollowUp.Reminder
	}
	head := m.Title
	if m.Summary != "" {
		head += "\n" + m.Summary
	}
	v.Head = fence(head, textWidth)
	if n.Approver != nil {
		v.Approver = n.Approver.DisplayName()
	}
	for _, f := range m.Fields {
		fv := field{ShownField: f, Fenced: fence(f.Value, textWidth)}
		if h := f.HTML; h != nil {
			fv.HTMLText = fence(h.Text, textWidth)
			var links []string
			for _, l := range h.Links {
				fv.Links = append(fv.Links, htmlLink{N: l.N, Text: l.Text, Href: l.Href})
				links = append(links, fmt.Sprintf("[%d] %s → %s", l.N, l.Text, l.Href))
			}
			if len(links) > 0 {
				fv.HTMLLinks = fence(strings.Join(links, "\n"), textWidth)
			}
			fv.Remote = h.Remote
		}
		v.Fields = append(v.Fields, fv)
	}
	for _, c := range m.Diff {
		ch := change{Field: c.Field, Before: side(c.Before, c.BeforeAbsent), After: side(c.After, c.AfterAbsent)}
		if c.Item > 0 { // a bulk's row: say which item it changes
			ch.Field = fmt.Sprintf("item %d · %s", c.Item, c.Field)
		}
		ch.Fenced = fence(ch.Field+"\n  before: "+ch.Before+"\n  after:  "+ch.After, textWidth)
		v.Diff = append(v.Diff, ch)
	}
	for _, w := range m.Warnings {
		if t, ok := warningText[w]; ok {
			w = t
		}
		v.Warnings = append(v.Warnings, w)
	}
	return v
}

// fence is agent text as fenced lines of the text part, without a final
// line break.
func fence(s string, width int) string {
	return strings.Join(safetext.FenceLines(s, width), "\n")
}

// side shows a diff side: its JSON verbatim, or "(absent)".
func side(s string, absent bool) string {
	if absent {
		return "(absent)"
	}
	return s
}

// origin is scheme://host of an approval link, or "".
func origin(link string) string {
	u, err := url.Parse(link)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
