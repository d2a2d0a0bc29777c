package mailer

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Sender delivers messages. Implementations: *SMTP (a real server) and
// *DevMailbox (development mode).
type Sender interface {
	// Send transmits m and returns the envelope recipients the server
	// accepted. On failure it returns a *SendError that says whether the
	// message may have been delivered anyway.
	Send(ctx context.Context, m *Message) (accepted []string, err error)
}

// SMTP sends through an SMTP server with go-mail, one connection per
// message.
type SMTP struct {
	cfg Config
	now func() time.Time
}

var _ Sender = (*SMTP)(nil)

// NewSMTP returns a Sender for cfg. It does not connect.
func NewSMTP(cfg Config) *SMTP {
	return &SMTP{cfg: cfg, now: time.Now}
}

// Config returns the configuration the sender uses.
func (s *SMTP) Config() Config { return s.cfg }

// Send dials the server, sends m, and quits. Each step is bounded by the
// config's timeout or ctx's deadline, whichever comes first, and
// cancelling ctx closes the connection at once.
func (s *SMTP) Send(ctx context.Context, m *Message) ([]string, error) {
	msg, err := m.build(s.now())
	if err != nil {
		return nil, &SendError{Stage: StageMessage, Err: err}
	}
	var release func() bool
	defer func() {
		if release != nil {
			release()
		}
	}()
	client, err := s.client(ctx, &release)
	if err != nil {
		return nil, &SendError{Stage: StageConnect, Err: err}
	}
	err = client.DialAndSendWithContext(ctx, msg)
	if msg.IsDelivered() {
		// The server answered 250 to the end of data: the message is
		// its responsibility now, whatever failed afterwards (RSET, QUIT).
		return m.Recipients(), nil
	}
	if err == nil {
		return nil, &SendError{Stage: StageUnknown, OutcomeUnknown: true, Err: errors.New("go-mail reported no error and no delivery")}
	}
	return nil, classify(err)
}

// client configures a go-mail client. Its dialer ties the connection to
// ctx (go-mail itself only uses ctx while dialling) and stores in *release
// the function that unties it.
func (s *SMTP) client(ctx context.Context, release *func() bool) (*gomail.Client, error) {
	timeout := s.cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < timeout {
			timeout = max(left, time.Millisecond)
		}
	}
	tlsConfig := &tls.Config{
		ServerName:         s.cfg.Host,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: s.cfg.InsecureSkipVerify, // #nosec G402 -- tests only, documented in ParseURL
	}
	dial := func(dialCtx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		var conn net.Conn
		var err error
		if s.cfg.TLS == TLSImplicit {
			// go-mail does not wrap a custom dialer's conn in TLS itself.
			conn, err = (&tls.Dialer{NetDialer: &d, Config: tlsConfig}).DialContext(dialCtx, network, addr)
		} else {
			conn, err = d.DialContext(dialCtx, network, addr)
		}
		if err != nil {
			return nil, err
		}
		*release = context.AfterFunc(ctx, func() { _ = conn.Close() })
		return conn, nil
	}
	opts := []gomail.Option{
		gomail.WithTimeout(timeout),
		gomail.WithTLSConfig(tlsConfig),
		gomail.WithDialContextFunc(dial),
	}
	switch s.cfg.TLS {
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL()) // with our dialer: only "no STARTTLS on top"
	case TLSOpportunistic:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	case TLSNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if s.cfg.Username != "" {
		mech := gomail.SMTPAuthPlain
		if s.cfg.Auth == AuthLogin {
			mech = gomail.SMTPAuthLogin
		}
		opts = append(opts, gomail.WithSMTPAuth(mech),
			gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.cfg.Password))
	}
	// Last, so that no option above can move the port.
	opts = append(opts, gomail.WithPort(s.cfg.Port))
	return gomail.NewClient(s.cfg.Host, opts...)
}
