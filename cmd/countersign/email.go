package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	actemail "github.com/countersign/countersign/action/email"
	notifyemail "github.com/countersign/countersign/channel/email"
	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/web"
)

// emailEffects wires email.send and the email channel. With
// COUNTERSIGN_SMTP_URL both send through that server. Without it, in
// development mode only, email.send delivers into an in-memory mailbox
// shown at /dev/mail; approval requests never go there, because anyone who
// can open /dev/mail (the agent included) could read the links in them.
func (m *Main) emailEffects(e *effects, file *config.File, dev bool) error {
	var sender mailer.Sender
	var from mail.Address
	if u := m.get("COUNTERSIGN_SMTP_URL", ""); u != "" {
		cfg, err := mailer.ParseURL(u)
		if err != nil {
			return fmt.Errorf("COUNTERSIGN_SMTP_URL: %w", err)
		}
		// Two senders: the agents' mail (email.send) from email_from, and
		// countersign's own (approval requests) from notify_from. Both
		// default to the SMTP URL's from; the second never takes the first,
		// which may be the requester's human.
		if from, err = address("settings.email_from", file.Settings.EmailFrom, cfg.From); err != nil {
			return err
		}
		notifyFrom, err := address("settings.notify_from", file.Settings.NotifyFrom, cfg.From)
		if err != nil {
			return err
		}
		sender = mailer.NewSMTP(cfg)
		n, err := notifyemail.New(sender, notifyFrom)
		if err != nil {
			return err
		}
		e.notifiers["email"] = n
	} else if dev {
		box := mailer.NewDevMailbox(100)
		sender, from = box, mail.Address{Name: "countersign (development)", Address: "countersign@localhost"}
		e.devMail = devMailbox{box}
	} else {
		if slices.Contains(file.Channels(), "email") {
			return fmt.Errorf("a route notifies by email but COUNTERSIGN_SMTP_URL is not set")
		}
		return nil // no email.send without an SMTP server outside development
	}
	l := file.Limits.Email
	a, err := actemail.New(sender, from, actemail.Limits{
		MaxRecipients: l.MaxRecipients, AllowedDomains: l.AllowedDomains, InternalDomains: l.InternalDomains,
		MaxAttachments: l.MaxAttachments, MaxAttachmentBytes: int(l.MaxAttachmentBytes),
	})
	if err != nil {
		return err
	}
	e.actions = append(e.actions, a)
	return nil
}

// devMailbox shows the development mailbox on /dev/mail.
type devMailbox struct{ box *mailer.DevMailbox }

func (d devMailbox) List() []web.DevMessage {
	var out []web.DevMessage
	for _, m := range d.box.List() {
		var to []string
		for _, a := range m.Message.To {
			to = append(to, a.String())
		}
		out = append(out, web.DevMessage{ID: strconv.Itoa(m.ID), At: m.ReceivedAt, From: m.Message.From.String(), To: to,
			Subject: m.Message.Subject, Text: m.Message.Text, HTML: m.Message.HTML, Raw: string(m.Raw),
			Attachments: devAttachments(m.Message.Attachments)})
	}
	return out
}

// address reads an address setting, def when unset.
func address(name, v string, def mail.Address) (mail.Address, error) {
	if v == "" {
		return def, nil
	}
	a, err := mail.ParseAddress(v)
	if err != nil {
		return mail.Address{}, fmt.Errorf("%s %q is not an email address", name, v)
	}
	return *a, nil
}

// devAttachments describes a message's attachments for /dev/mail, with the
// content of a text attachment (valid UTF-8, at most 64 KiB) shown whole.
func devAttachments(as []mailer.Attachment) []web.DevAttachment {
	var out []web.DevAttachment
	for _, a := range as {
		sum := sha256.Sum256(a.Data)
		d := web.DevAttachment{Name: a.Name, ContentType: a.ContentType, Bytes: len(a.Data), SHA256: hex.EncodeToString(sum[:])}
		if strings.HasPrefix(a.ContentType, "text/") && len(a.Data) <= 64<<10 && utf8.Valid(a.Data) {
			d.Text = string(a.Data)
		}
		out = append(out, d)
	}
	return out
}
