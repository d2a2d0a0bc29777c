package mailer_test

import (
	"context"
	"errors"
	"net"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

func testMessage() *mailer.Message {
	return &mailer.Message{
		From:      mail.Address{Name: "Countersign", Address: "countersign@localhost"},
		To:        []mail.Address{{Name: "Jörg Müller", Address: "jorg@client.example"}},
		Cc:        []mail.Address{{Name: "Doe, Jane", Address: "jane@client.example"}},
		Bcc:       []mail.Address{{Address: "audit@corp.example"}},
		ReplyTo:   &mail.Address{Address: "support@corp.example"},
		Subject:   "Ihre Bestellung — order #42",
		Text:      "Hello,\n\nyour order ships today. A long line that needs soft line breaks in quoted-printable because it is longer than seventy-six characters.\n.\nA line with only a dot above.\n",
		HTML:      "<p>Hello,</p>\n<p>your order ships <b>today</b> = soon.</p>",
		MessageID: "op_abc@countersign",
		Headers:   map[string]string{"X-Countersign-Operation": "op_abc"},
		Date:      time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
	}
}

func sender(t *testing.T, url string) *mailer.SMTP {
	t.Helper()
	cfg, err := mailer.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	return mailer.NewSMTP(cfg)
}

func TestSendDelivers(t *testing.T) {
	tests := []struct {
		name string
		opts smtptest.Options
	}{
		{"plain", smtptest.Options{}},
		{"auth", smtptest.Options{Username: "user", Password: "p@ss w:rd"}},
		{"starttls with auth", smtptest.Options{StartTLS: true, Username: "user", Password: "pw"}},
		{"implicit tls with auth", smtptest.Options{ImplicitTLS: true, Username: "user", Password: "pw"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := smtptest.Start(t, tt.opts)
			m := testMessage()
			accepted, err := sender(t, srv.URL()).Send(context.Background(), m)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Join(accepted, ","), "jorg@client.example,jane@client.example,audit@corp.example"; got != want {
				t.Errorf("accepted = %q, want %q", got, want)
			}
			msgs, err := srv.WaitFor(1, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			got := msgs[0]
			if want := tt.opts.StartTLS || tt.opts.ImplicitTLS; got.TLS != want {
				t.Errorf("TLS = %v, want %v", got.TLS, want)
			}
			if got, want := got.Username, tt.opts.Username; got != want {
				t.Errorf("Username = %q, want %q", got, want)
			}
			if got, want := got.From, "countersign@localhost"; got != want {
				t.Errorf("envelope from = %q, want %q", got, want)
			}
			if got, want := strings.Join(got.To, ","), strings.Join(accepted, ","); got != want {
				t.Errorf("envelope to = %q, want %q", got, want)
			}
			checkRendered(t, got.Data, m)
		})
	}
}

// checkRendered parses raw as a mail client would and compares it with m.
func checkRendered(t *testing.T, raw []byte, m *mailer.Message) {
	t.Helper()
	p, err := smtptest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Text, m.Text; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if got, want := p.HTML, m.HTML; got != want {
		t.Errorf("html = %q, want %q", got, want)
	}
	if got, want := p.Subject, m.Subject; got != want {
		t.Errorf("subject = %q, want %q", got, want)
	}
	headers := []struct{ name, want string }{
		{"Message-Id", "<" + m.MessageID + ">"},
		{"X-Countersign-Operation", m.Headers["X-Countersign-Operation"]},
		{"Bcc", ""},
		{"Date", m.Date.Format(time.RFC1123Z)},
	}
	for _, h := range headers {
		if got := p.Header.Get(h.name); got != h.want {
			t.Errorf("%s = %q, want %q", h.name, got, h.want)
		}
	}
	addrs := []struct {
		header string
		want   []mail.Address
	}{
		{"From", []mail.Address{m.From}},
		{"To", m.To},
		{"Cc", m.Cc},
		{"Reply-To", []mail.Address{*m.ReplyTo}},
	}
	for _, a := range addrs {
		list, err := p.Addresses(a.header)
		if err != nil {
			t.Errorf("%s: %v", a.header, err)
			continue
		}
		if got, want := len(list), len(a.want); got != want {
			t.Errorf("%s has %d addresses, want %d", a.header, got, want)
			continue
		}
		for i := range list {
			if got, want := *list[i], a.want[i]; got != want {
				t.Errorf("%s[%d] = %+v, want %+v", a.header, i, got, want)
			}
		}
	}
}

func TestSendTextOnly(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	m := &mailer.Message{From: mail.Address{Address: "a@localhost"}, To: []mail.Address{{Address: "b@x.example"}},
		Subject: "plain", Text: "just text, no trailing newline", MessageID: "x@countersign",
		Date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if _, err := sender(t, srv.URL()).Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	msgs, err := srv.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p, err := msgs[0].Parse()
	if err != nil {
		t.Fatal(err)
	}
	// SMTP framing ends every message with a line break.
	if got, want := p.Text, m.Text+"\n"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	// Render produces exactly what went over the wire.
	raw, err := mailer.Render(m, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(msgs[0].Data), string(raw); got != want {
		t.Errorf("received\n%s\nwant (Render)\n%s", got, want)
	}
	if got, want := p.Parts, 1; got != want {
		t.Errorf("parts = %d, want %d", got, want)
	}
	if !strings.HasPrefix(p.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("Content-Type = %q, want text/plain", p.Header.Get("Content-Type"))
	}
	if p.Header.Get("Message-Id") == "" {
		t.Error("no Message-ID generated")
	}
}

func TestSendFailures(t *testing.T) {
	tests := []struct {
		name          string
		opts          smtptest.Options
		query         string // replaces the URL's query
		password      string // overrides the password in the URL
		stage         mailer.Stage
		unknown       bool
		code          int
		temporary     bool
		wantDelivered smtptest.Outcome // "" when no body may reach the server
	}{
		{name: "rcpt rejected", opts: smtptest.Options{Fail: smtptest.Fail{RejectRcpt: []string{"jane@client.example"}}},
			stage: mailer.StageRcpt, code: 550},
		{name: "data command 451", opts: smtptest.Options{Fail: smtptest.Fail{DataCommand: 451}},
			stage: mailer.StageData, code: 451, temporary: true},
		{name: "data command 554", opts: smtptest.Options{Fail: smtptest.Fail{DataCommand: 554}},
			stage: mailer.StageData, code: 554},
		{name: "end of data 554", opts: smtptest.Options{Fail: smtptest.Fail{DataReply: 554}},
			stage: mailer.StageDataEnd, code: 554, wantDelivered: smtptest.Rejected},
		{name: "end of data 452", opts: smtptest.Options{Fail: smtptest.Fail{DataReply: 452}},
			stage: mailer.StageDataEnd, code: 452, temporary: true, wantDelivered: smtptest.Rejected},
		{name: "dropped after data", opts: smtptest.Options{Fail: smtptest.Fail{DropAfterData: true}},
			stage: mailer.StageDataEnd, unknown: true, wantDelivered: smtptest.Dropped},
		{name: "wrong password", opts: smtptest.Options{Username: "user", Password: "right"}, password: "wrong",
			stage: mailer.StageConnect},
		{name: "auth required", opts: smtptest.Options{Username: "user", Password: "right"}, query: "tls=none", password: "-",
			stage: mailer.StageMailFrom, code: 502},
		{name: "mandatory tls without starttls", opts: smtptest.Options{}, query: "tls=mandatory",
			stage: mailer.StageConnect},
		{name: "certificate not trusted", opts: smtptest.Options{StartTLS: true}, query: "tls=mandatory",
			stage: mailer.StageConnect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := smtptest.Start(t, tt.opts)
			cfg, err := mailer.ParseURL(srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			if tt.query != "" {
				if cfg, err = mailer.ParseURL("smtp://" + srv.Addr() + "?" + tt.query); err != nil {
					t.Fatal(err)
				}
				if tt.opts.Username != "" {
					cfg.Username, cfg.Password = tt.opts.Username, tt.opts.Password
				}
			}
			switch tt.password {
			case "":
			case "-":
				cfg.Username, cfg.Password = "", ""
			default:
				cfg.Password = tt.password
			}
			cfg.Timeout = 5 * time.Second
			_, err = mailer.NewSMTP(cfg).Send(context.Background(), testMessage())
			var se *mailer.SendError
			if !errors.As(err, &se) {
				t.Fatalf("error %v (%T) is not a *mailer.SendError", err, err)
			}
			if got, want := se.Stage, tt.stage; got != want {
				t.Errorf("Stage = %q, want %q (%v)", got, want, err)
			}
			if got, want := se.OutcomeUnknown, tt.unknown; got != want {
				t.Errorf("OutcomeUnknown = %v, want %v (%v)", got, want, err)
			}
			if got, want := mailer.OutcomeUnknown(err), tt.unknown; got != want {
				t.Errorf("mailer.OutcomeUnknown = %v, want %v", got, want)
			}
			if got, want := se.Code, tt.code; got != want {
				t.Errorf("Code = %d, want %d (%v)", got, want, err)
			}
			if got, want := se.Temporary, tt.temporary; got != want {
				t.Errorf("Temporary = %v, want %v", got, want)
			}
			if se.Message() == "" || strings.Contains(se.Message(), "right") {
				t.Errorf("Message() = %q", se.Message())
			}
			msgs := srv.Messages()
			switch {
			case tt.wantDelivered == "" && len(msgs) != 0:
				t.Errorf("server received %d message bodies, want none", len(msgs))
			case tt.wantDelivered != "" && (len(msgs) != 1 || msgs[0].Outcome != tt.wantDelivered):
				t.Errorf("server received %+v, want one %s body", msgs, tt.wantDelivered)
			}
		})
	}
}

func TestSendConnectFailures(t *testing.T) {
	// A port with nothing listening.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()

	// A server that accepts and never greets.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()

	tests := []struct {
		name string
		addr string
		ctx  context.Context
	}{
		{"connection refused", closedAddr, context.Background()},
		{"silent server, context deadline", silent.Addr().String(), short},
		{"canceled context", silent.Addr().String(), canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sender(t, "smtp://"+tt.addr+"?tls=none")
			start := time.Now()
			_, err := s.Send(tt.ctx, testMessage())
			var se *mailer.SendError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *mailer.SendError", err)
			}
			if got, want := se.Stage, mailer.StageConnect; got != want {
				t.Errorf("Stage = %q, want %q (%v)", got, want, err)
			}
			if se.OutcomeUnknown {
				t.Errorf("OutcomeUnknown = true for a connect failure")
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Send took %s, want it bounded by the context", d)
			}
		})
	}
}

// A server that takes the body but answers too late leaves the outcome
// open, whether the context or the configured timeout ends the wait; and
// cancelling the context closes the connection at once.
func TestSendTimeoutAfterBodyIsUnknown(t *testing.T) {
	tests := []struct {
		name    string
		ctx     time.Duration // context deadline; 0 for none
		timeout time.Duration // config timeout
	}{
		{"context deadline", 300 * time.Millisecond, 10 * time.Second},
		{"config timeout", 0, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := smtptest.Start(t, smtptest.Options{Fail: smtptest.Fail{StallAfterData: 10 * time.Second}})
			cfg, err := mailer.ParseURL(srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			cfg.Timeout = tt.timeout
			ctx := context.Background()
			if tt.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctx)
				defer cancel()
			}
			start := time.Now()
			_, err = mailer.NewSMTP(cfg).Send(ctx, testMessage())
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Send took %s", d)
			}
			var se *mailer.SendError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *mailer.SendError", err)
			}
			if got, want := se.Stage, mailer.StageDataEnd; got != want {
				t.Errorf("Stage = %q, want %q (%v)", got, want, err)
			}
			if !se.OutcomeUnknown {
				t.Errorf("OutcomeUnknown = false after the body was sent (%v)", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m *mailer.Message)
	}{
		{"no from", func(m *mailer.Message) { m.From = mail.Address{} }},
		{"no recipients", func(m *mailer.Message) { m.To, m.Cc, m.Bcc = nil, nil, nil }},
		{"CRLF in subject", func(m *mailer.Message) { m.Subject = "hi\r\nBcc: evil@x.example" }},
		{"LF in subject", func(m *mailer.Message) { m.Subject = "hi\nX: y" }},
		{"CR in display name", func(m *mailer.Message) { m.To[0].Name = "A\rB" }},
		{"LF in reply-to name", func(m *mailer.Message) { m.ReplyTo.Name = "x\ny" }},
		{"not an address", func(m *mailer.Message) { m.Cc[0].Address = "jane" }},
		{"CRLF in header value", func(m *mailer.Message) { m.Headers["X-Countersign-Operation"] = "op\r\nBcc: x@y" }},
		{"reserved header", func(m *mailer.Message) { m.Headers["Bcc"] = "x@y.example" }},
		{"bad header name", func(m *mailer.Message) { m.Headers["X Bad"] = "v" }},
		{"malformed message id", func(m *mailer.Message) { m.MessageID = "<op@countersign>" }},
		{"message id without at", func(m *mailer.Message) { m.MessageID = "op" }},
	}
	srv := smtptest.Start(t, smtptest.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := testMessage()
			tt.modify(m)
			if err := m.Validate(); err == nil {
				t.Fatal("Validate succeeded, want an error")
			}
			_, err := sender(t, srv.URL()).Send(context.Background(), m)
			var se *mailer.SendError
			if !errors.As(err, &se) || se.Stage != mailer.StageMessage || se.OutcomeUnknown {
				t.Errorf("Send error = %v, want a message-stage error with a known outcome", err)
			}
		})
	}
	if got := len(srv.Messages()); got != 0 {
		t.Errorf("server received %d messages, want 0", got)
	}
	if err := testMessage().Validate(); err != nil {
		t.Errorf("valid message: %v", err)
	}
}

func TestOutcomeUnknown(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"foreign error", errors.New("boom"), true},
		{"known", &mailer.SendError{Stage: mailer.StageRcpt}, false},
		{"wrapped unknown", errors.Join(errors.New("x"), &mailer.SendError{Stage: mailer.StageDataEnd, OutcomeUnknown: true}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := mailer.OutcomeUnknown(tt.err), tt.want; got != want {
				t.Errorf("OutcomeUnknown = %v, want %v", got, want)
			}
		})
	}
}
