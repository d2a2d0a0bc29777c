package smtptest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
)

// Parsed is a received message decoded the way a mail client would show
// it: headers, and the text and HTML bodies with transfer encodings
// undone and CRLF line ends turned into "\n".
type Parsed struct {
	Header  mail.Header
	Subject string // RFC 2047 decoded
	Text    string // the text/plain part, "" if none
	HTML    string // the text/html part, "" if none
	// Parts counts the leaf parts found (1 for a single-part message).
	Parts int
	// Attachments are the parts with Content-Disposition attachment, in
	// order, decoded as a mail client would show and save them.
	Attachments []Attachment
}

// Attachment is one attached file as received.
type Attachment struct {
	Name        string // the filename parameter, RFC 2047 decoded
	ContentType string // the media type and its parameters other than name
	Data        []byte
}

// Addresses returns the decoded address list of a header (From, To, Cc,
// Reply-To), or nil when the header is absent.
func (p *Parsed) Addresses(name string) ([]*mail.Address, error) {
	if p.Header.Get(name) == "" {
		return nil, nil
	}
	return p.Header.AddressList(name)
}

// Parse decodes a raw RFC 5322 message with net/mail and mime/multipart.
// It understands single-part text/plain or text/html bodies and nested
// multipart containers, in quoted-printable, base64, 7bit or 8bit, UTF-8.
func Parse(raw []byte) (*Parsed, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("smtptest: parse: %w", err)
	}
	p := &Parsed{Header: msg.Header}
	if s := msg.Header.Get("Subject"); s != "" {
		if p.Subject, err = new(mime.WordDecoder).DecodeHeader(s); err != nil {
			return nil, fmt.Errorf("smtptest: subject: %w", err)
		}
	}
	if err := p.walk(msg.Header, msg.Body); err != nil {
		return nil, err
	}
	return p, nil
}

type header interface{ Get(string) string }

func (p *Parsed) walk(h header, body io.Reader) error {
	contentType, encoding := h.Get("Content-Type"), h.Get("Content-Transfer-Encoding")
	if contentType == "" {
		contentType = "text/plain; charset=us-ascii"
	}
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("smtptest: content type %q: %w", contentType, err)
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("smtptest: multipart: %w", err)
			}
			// NextPart undoes quoted-printable itself and removes the header.
			if err := p.walk(part.Header, part); err != nil {
				return err
			}
		}
	}
	disposition, dparams, _ := mime.ParseMediaType(h.Get("Content-Disposition"))
	attached := disposition == "attachment"
	if cs := strings.ToLower(params["charset"]); !attached && cs != "" && cs != "utf-8" && cs != "us-ascii" {
		return fmt.Errorf("smtptest: unsupported charset %q", cs)
	}
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, body) // skips line breaks itself
	case "", "7bit", "8bit", "binary":
	default:
		return fmt.Errorf("smtptest: unsupported transfer encoding %q", encoding)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("smtptest: body: %w", err)
	}
	p.Parts++
	if attached {
		name, err := new(mime.WordDecoder).DecodeHeader(dparams["filename"])
		if err != nil {
			return fmt.Errorf("smtptest: attachment name %q: %w", dparams["filename"], err)
		}
		delete(params, "name")
		p.Attachments = append(p.Attachments, Attachment{Name: name, ContentType: mime.FormatMediaType(mediaType, params), Data: b})
		return nil
	}
	text := strings.ReplaceAll(string(b), "\r\n", "\n")
	switch mediaType {
	case "text/plain":
		p.Text = text
	case "text/html":
		p.HTML = text
	}
	return nil
}
