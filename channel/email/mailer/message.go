package mailer

import (
	"bytes"
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Message is the one representation of an email in countersign: what the
// action and the notifier build, what a Sender sends and what the
// development mailbox keeps. Addresses are net/mail values; display names
// are encoded on the wire as needed.
type Message struct {
	From    mail.Address
	To      []mail.Address
	Cc      []mail.Address
	Bcc     []mail.Address // envelope only: never written as a header
	ReplyTo *mail.Address
	Subject string
	Text    string
	// HTML, when set, makes the message multipart/alternative.
	HTML string
	// Attachments make it multipart/mixed; each is sent base64-encoded
	// with its name and content type as given.
	Attachments []Attachment
	// MessageID without angle brackets ("op_x@countersign"). Deterministic
	// ids let a retried send be recognised downstream. Empty: a random one.
	MessageID string
	// Headers are extra header fields, such as X-Countersign-Operation.
	Headers map[string]string
	// Date of the message; zero means the time it is sent.
	Date time.Time
}

// Attachment is one file of a message.
type Attachment struct {
	Name        string
	ContentType string
	Data        []byte
}

// Recipients lists every envelope recipient: To, then Cc, then Bcc.
func (m *Message) Recipients() []string {
	var r []string
	for _, l := range [][]mail.Address{m.To, m.Cc, m.Bcc} {
		for _, a := range l {
			r = append(r, a.Address)
		}
	}
	return r
}

var (
	headerName = regexp.MustCompile(`^[A-Za-z0-9-]{1,76}$`)
	messageID  = regexp.MustCompile(`^[^<>@\s"]{1,200}@[^<>@\s"]{1,200}$`)
	// Header fields a caller must set through the struct, not Headers.
	reserved = map[string]bool{"from": true, "to": true, "cc": true, "bcc": true, "reply-to": true,
		"subject": true, "message-id": true, "date": true, "mime-version": true,
		"content-type": true, "content-transfer-encoding": true, "sender": true}
)

// Validate refuses messages that cannot be sent safely: no sender or no
// recipient, and any line break in a header value, which would let text
// become headers of its own (header injection).
func (m *Message) Validate() error {
	if m.From.Address == "" {
		return errors.New("mailer: message has no From address")
	}
	if len(m.Recipients()) == 0 {
		return errors.New("mailer: message has no recipient")
	}
	check := func(what, v string) error {
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("mailer: %s contains a line break", what)
		}
		return nil
	}
	addrs := append([]mail.Address{m.From}, m.To...)
	addrs = append(addrs, m.Cc...)
	addrs = append(addrs, m.Bcc...)
	if m.ReplyTo != nil {
		addrs = append(addrs, *m.ReplyTo)
	}
	for _, a := range addrs {
		if err := check("an address", a.Name+a.Address); err != nil {
			return err
		}
		if strings.Count(a.Address, "@") != 1 {
			return fmt.Errorf("mailer: %q is not an email address", a.Address)
		}
	}
	if err := check("the subject", m.Subject); err != nil {
		return err
	}
	if m.MessageID != "" && !messageID.MatchString(m.MessageID) {
		return fmt.Errorf("mailer: Message-ID %q is malformed", m.MessageID)
	}
	for _, a := range m.Attachments {
		// The writer would replace these in a name; refuse rather than send
		// another name than the one given.
		if a.Name == "" || strings.ContainsAny(a.Name, "\"/:<>?\\|\x7f") || strings.IndexFunc(a.Name, func(r rune) bool { return r < 32 }) >= 0 {
			return fmt.Errorf("mailer: attachment name %q cannot be sent as written", a.Name)
		}
		if err := check("an attachment's content type", a.ContentType); err != nil || a.ContentType == "" {
			return fmt.Errorf("mailer: attachment %q has no valid content type", a.Name)
		}
	}
	for k, v := range m.Headers {
		if !headerName.MatchString(k) || reserved[strings.ToLower(k)] {
			return fmt.Errorf("mailer: header name %q is not allowed", k)
		}
		if err := check("header "+k, v); err != nil {
			return err
		}
	}
	return nil
}

// build turns m into a go-mail message, dated now if m has no date.
func (m *Message) build(now time.Time) (*gomail.Msg, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	g := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	from := m.From
	g.FromMailAddress(&from)
	ptrs := func(l []mail.Address) []*mail.Address {
		out := make([]*mail.Address, len(l))
		for i := range l {
			a := l[i]
			out[i] = &a
		}
		return out
	}
	if len(m.To) > 0 {
		g.ToMailAddress(ptrs(m.To)...)
	}
	if len(m.Cc) > 0 {
		g.CcMailAddress(ptrs(m.Cc)...)
	}
	if len(m.Bcc) > 0 {
		g.BccMailAddress(ptrs(m.Bcc)...)
	}
	if m.ReplyTo != nil {
		r := *m.ReplyTo
		g.ReplyToMailAddress(&r)
	}
	g.Subject(m.Subject)
	if m.MessageID != "" {
		g.SetMessageIDWithValue(m.MessageID)
	} else {
		g.SetMessageID()
	}
	date := m.Date
	if date.IsZero() {
		date = now
	}
	g.SetDateWithValue(date)
	for k, v := range m.Headers {
		g.SetGenHeader(gomail.Header(k), v)
	}
	g.SetUserAgent("countersign")
	g.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		g.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	for _, a := range m.Attachments {
		if err := g.AttachReader(a.Name, bytes.NewReader(a.Data), gomail.WithFileContentType(gomail.ContentType(a.ContentType)),
			gomail.WithFileEncoding(gomail.EncodingB64)); err != nil {
			return nil, fmt.Errorf("mailer: attachment %q: %w", a.Name, err)
		}
	}
	return g, nil
}

// Render returns the bytes a Sender would transmit for m (headers and
// body, CRLF line ends), dated now if m has no date. Like SMTP's DATA
// framing, it ends the message with a line break if it has none, so a
// single-part body "x" arrives as "x\r\n": callers that want previews to
// match exactly end their bodies with a line break.
func Render(m *Message, now time.Time) ([]byte, error) {
	g, err := m.build(now)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := g.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("mailer: render: %w", err)
	}
	if !bytes.HasSuffix(b.Bytes(), []byte("\r\n")) {
		b.WriteString("\r\n")
	}
	return b.Bytes(), nil
}
