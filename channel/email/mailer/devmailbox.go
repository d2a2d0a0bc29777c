package mailer

import (
	"bytes"
	"context"
	"net/mail"
	"sync"
	"time"
)

// DevMailbox is the Sender of development mode: instead of reaching a
// mail server it keeps the most recent messages in memory, rendered
// exactly as SMTP would transmit them, for the /dev/mail page. It is safe
// for concurrent use.
type DevMailbox struct {
	mu   sync.Mutex
	max  int
	seq  int
	msgs []DevMessage // oldest first
	now  func() time.Time
}

// DevMessage is one message kept by a DevMailbox.
type DevMessage struct {
	// ID numbers messages from 1 in arrival order, for links to one message.
	ID         int
	ReceivedAt time.Time
	// Message is what the sender built.
	Message Message
	// Raw is the message as it would have gone over SMTP.
	Raw []byte
	// Header is Raw's header, parsed with net/mail (values as transmitted,
	// so non-ASCII subjects and names appear RFC 2047 encoded).
	Header mail.Header
}

var _ Sender = (*DevMailbox)(nil)

// NewDevMailbox keeps the last max messages (50 if max < 1).
func NewDevMailbox(max int) *DevMailbox {
	if max < 1 {
		max = 50
	}
	return &DevMailbox{max: max, now: time.Now}
}

// SetClock replaces the clock used for the Date header and ReceivedAt.
func (d *DevMailbox) SetClock(now func() time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.now = now
}

// Send keeps m and reports every recipient as accepted.
func (d *DevMailbox) Send(ctx context.Context, m *Message) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, &SendError{Stage: StageConnect, Err: err}
	}
	d.mu.Lock()
	now := d.now()
	d.mu.Unlock()
	raw, err := Render(m, now)
	if err != nil {
		return nil, &SendError{Stage: StageMessage, Err: err}
	}
	parsed, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, &SendError{Stage: StageMessage, Err: err}
	}
	kept := *m
	kept.To = append([]mail.Address(nil), m.To...)
	kept.Cc = append([]mail.Address(nil), m.Cc...)
	kept.Bcc = append([]mail.Address(nil), m.Bcc...)
	if m.ReplyTo != nil {
		r := *m.ReplyTo
		kept.ReplyTo = &r
	}
	if kept.Date.IsZero() {
		kept.Date = now
	}
	if m.Headers != nil {
		kept.Headers = make(map[string]string, len(m.Headers))
		for k, v := range m.Headers {
			kept.Headers[k] = v
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	d.msgs = append(d.msgs, DevMessage{ID: d.seq, ReceivedAt: now, Message: kept, Raw: raw, Header: parsed.Header})
	if len(d.msgs) > d.max {
		d.msgs = append([]DevMessage(nil), d.msgs[len(d.msgs)-d.max:]...)
	}
	return m.Recipients(), nil
}

// List returns the kept messages, newest first.
func (d *DevMailbox) List() []DevMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]DevMessage, len(d.msgs))
	for i, m := range d.msgs {
		out[len(d.msgs)-1-i] = m
	}
	return out
}

// Get returns the kept message with this ID.
func (d *DevMailbox) Get(id int) (DevMessage, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.msgs {
		if m.ID == id {
			return m, true
		}
	}
	return DevMessage{}, false
}
