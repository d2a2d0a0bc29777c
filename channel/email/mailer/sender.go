package mailer

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	gomail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"
)

// Sender delivers messages. Implementations: *SMTP (a real server) and
// *DevMailbox (development mode).
type Sender interface {
	// Send transmits m and returns the envelope recipients the server
	// accepted. On failure it returns a *SendError that says whether the
	// message may have been delivered anyway.
	Send(ctx context.Context, m *Message) (accepted []string, err error)
}

// SMTP sends through an SMTP server with go-mail. A connection whose
// message went through cleanly is kept for the next message (at most
// maxIdle of them, each reused for idleFor): connecting, the greeting,
// EHLO, STARTTLS and AUTH are paid once, not for every message.
type SMTP struct {
	cfg  Config
	now  func() time.Time
	idle chan *session
}

var _ Sender = (*SMTP)(nil)

// session is one connection to the server, greeted and logged in.
type session struct {
	gm   *gomail.Client
	sc   *smtp.Client
	conn net.Conn
	used time.Time
}

func (ss *session) close() { _ = ss.conn.Close() }

// quit says goodbye to the server (bounded by the connection's deadline)
// and closes the connection.
func (ss *session) quit() {
	_ = ss.gm.CloseWithSMTPClient(ss.sc)
	ss.close()
}

const (
	maxIdle = 8
	// idleFor is how long a kept connection is used again, well within
	// the 5 minutes RFC 5321 asks servers to wait for the next command.
	idleFor = 15 * time.Second
)

// NewSMTP returns a Sender for cfg. It does not connect.
func NewSMTP(cfg Config) *SMTP {
	return &SMTP{cfg: cfg, now: time.Now, idle: make(chan *session, maxIdle)}
}

// Config returns the configuration the sender uses.
func (s *SMTP) Config() Config { return s.cfg }

// Send sends m over a kept connection, or a new one. Each step is bounded
// by the config's timeout or ctx's deadline, whichever comes first, and
// cancelling ctx closes the connection at once.
//
// A kept connection is first checked with NOOP (go-mail does, before the
// message); only when that check fails, so that nothing of the message
// reached the server, is the message sent again on a new connection. Any
// other failure is the message's, classified as for a new connection, and
// its connection is not kept.
func (s *SMTP) Send(ctx context.Context, m *Message) ([]string, error) {
	msg, err := m.build(s.now())
	if err != nil {
		return nil, &SendError{Stage: StageMessage, Err: err}
	}
	for {
		ss, kept := s.take()
		if kept {
			// The deadline of its last message may have passed while it
			// was kept; go-mail extends it only after its NOOP.
			_ = ss.conn.SetDeadline(time.Now().Add(s.timeout()))
		} else if ss, err = s.dial(ctx); err != nil {
			return nil, &SendError{Stage: StageConnect, Err: err}
		}
		stop := context.AfterFunc(ctx, ss.close) // cancelling ctx closes it
		err = ss.gm.SendWithSMTPClient(ss.sc, msg)
		tied := stop() // false: ctx ended and closed it
		if msg.IsDelivered() {
			// The server answered 250 to the end of data: the message is
			// its responsibility now, whatever failed afterwards (RSET).
			if err == nil && tied {
				s.keep(ss)
			} else {
				ss.close()
			}
			return m.Recipients(), nil
		}
		ss.close()
		if err == nil {
			return nil, &SendError{Stage: StageUnknown, OutcomeUnknown: true, Err: errors.New("go-mail reported no error and no delivery")}
		}
		se := classify(err)
		var ge *gomail.SendError
		if kept && tied && errors.As(err, &ge) && ge.Reason == gomail.ErrConnCheck {
			continue // the server let the kept connection go: a new one
		}
		return nil, se
	}
}

// take returns a kept connection that is fresh enough, and true; or false.
func (s *SMTP) take() (*session, bool) {
	for {
		select {
		case ss := <-s.idle:
			if time.Since(ss.used) < idleFor {
				return ss, true
			}
			ss.quit()
		default:
			return nil, false
		}
	}
}

// keep keeps a connection for the next message, or quits it when enough
// are kept.
func (s *SMTP) keep(ss *session) {
	ss.used = time.Now()
	select {
	case s.idle <- ss:
	default:
		ss.quit()
	}
}

// dial connects, greets and logs in. Cancelling ctx meanwhile closes the
// connection.
func (s *SMTP) dial(ctx context.Context) (*session, error) {
	ss := &session{}
	untie := func() bool { return true }
	defer func() { untie() }()
	netDial := s.dialer()
	gm, err := s.client(func(dialCtx context.Context, network, addr string) (net.Conn, error) {
		conn, err := netDial(dialCtx, network, addr)
		if err != nil {
			return nil, err
		}
		ss.conn = conn
		untie = context.AfterFunc(ctx, func() { _ = conn.Close() })
		return conn, nil
	})
	if err != nil {
		return nil, err
	}
	if ss.sc, err = gm.DialToSMTPClientWithContext(ctx); err != nil {
		if ss.conn != nil {
			ss.close()
		}
		return nil, err
	}
	ss.gm = gm
	return ss, nil
}

func (s *SMTP) tlsConfig() *tls.Config {
	return &tls.Config{
		ServerName:         s.cfg.Host,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: s.cfg.InsecureSkipVerify, // #nosec G402 -- tests only, documented in ParseURL
	}
}

// dialer opens the TCP connection, in TLS from the start for implicit TLS.
func (s *SMTP) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		if s.cfg.TLS == TLSImplicit {
			// go-mail does not wrap a custom dialer's conn in TLS itself.
			return (&tls.Dialer{NetDialer: &d, Config: s.tlsConfig()}).DialContext(ctx, network, addr)
		}
		return d.DialContext(ctx, network, addr)
	}
}

// timeout bounds each step of the conversation.
func (s *SMTP) timeout() time.Duration {
	if s.cfg.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.cfg.Timeout
}

// client configures a go-mail client for one connection, opened by dial.
// Its timeout, for every step, is the config's; a shorter deadline of the
// caller's context closes the connection when it passes.
func (s *SMTP) client(dial gomail.DialContextFunc) (*gomail.Client, error) {
	opts := []gomail.Option{
		gomail.WithTimeout(s.timeout()),
		gomail.WithTLSConfig(s.tlsConfig()),
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
