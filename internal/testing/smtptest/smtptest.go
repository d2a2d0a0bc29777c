// Package smtptest runs a real SMTP server in the test process, so that
// code which sends mail is tested against the protocol rather than a mock.
// The server records every message it receives and can be told to fail in
// the ways a real mail server fails: refusing a recipient, refusing the
// message, or vanishing after the body was sent (the case where the sender
// cannot know whether the mail went out).
package smtptest

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Options configure a test server.
type Options struct {
	// Username and Password, when Username is set, make the server offer
	// AUTH PLAIN and refuse MAIL FROM until the client authenticated with
	// exactly these credentials.
	Username string
	Password string
	// StartTLS offers STARTTLS with a self-signed certificate for 127.0.0.1.
	StartTLS bool
	// ImplicitTLS makes the listener speak TLS from the first byte (smtps).
	ImplicitTLS bool
	// Fail is the initial failure switch; Server.SetFail changes it later.
	Fail Fail
}

// Fail says how the server misbehaves. The zero value accepts everything.
type Fail struct {
	// RejectRcpt lists addresses (compared case-insensitively) refused at
	// RCPT TO with 550 5.1.1.
	RejectRcpt []string
	// DataCommand, when non-zero, is the reply code (4xx or 5xx) to the DATA
	// command itself: the client never gets to send the body. It works on
	// plain and implicit-TLS connections, not after STARTTLS.
	DataCommand int
	// DataReply, when non-zero, is the reply code (4xx or 5xx) to the end of
	// the message body: the server received the body and refused it.
	DataReply int
	// DropAfterData closes the connection after the whole body was received,
	// without replying: the client cannot know whether the mail was taken.
	DropAfterData bool
	// StallAfterData holds the reply to the end of the body this long (or
	// until the server closes), then accepts: a slow server, for timeouts.
	StallAfterData time.Duration
}

// Outcome is what the server did with a received message body.
type Outcome string

const (
	Accepted Outcome = "accepted" // replied 250 to the end of data
	Rejected Outcome = "rejected" // replied Fail.DataReply
	Dropped  Outcome = "dropped"  // closed the connection without a reply
)

// Message is one message body the server received in full.
type Message struct {
	From     string   // envelope sender (MAIL FROM)
	To       []string // envelope recipients (RCPT TO), in order
	Data     []byte   // the raw message as transmitted (headers and body, CRLF)
	Username string   // the authenticated user, if any
	TLS      bool     // whether the session was encrypted
	Outcome  Outcome
	At       time.Time
}

// Parse decodes the message's headers and text and HTML parts.
func (m Message) Parse() (*Parsed, error) { return Parse(m.Data) }

// Server is a running test SMTP server. It is closed when the test ends.
type Server struct {
	t    testing.TB
	opts Options
	ln   net.Listener
	srv  *smtp.Server

	closed chan struct{} // closed when the test ends

	mu      sync.Mutex
	fail    Fail
	msgs    []Message
	changed chan struct{} // closed and replaced whenever msgs grows
	stalled []Message     // bodies received whose reply Fail.StallAfterData holds back
	conns   []net.Conn    // every connection accepted
}

// Connections is how many connections the server has accepted.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// DropConnections closes every connection accepted so far, the way a
// server lets idle clients go.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
}

// Start starts a server on 127.0.0.1:0 and stops it in t.Cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, opts: opts, fail: opts.Fail, changed: make(chan struct{}), closed: make(chan struct{})}

	var tlsConfig *tls.Config
	if opts.StartTLS || opts.ImplicitTLS {
		cert, err := selfSigned()
		if err != nil {
			t.Fatalf("smtptest: certificate: %v", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("smtptest: listen: %v", err)
	}
	if opts.ImplicitTLS {
		ln = tls.NewListener(ln, tlsConfig)
	}
	s.ln = &gateListener{Listener: ln, s: s}

	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = "smtptest.local"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	srv.MaxMessageBytes = 10 << 20
	srv.ErrorLog = log.New(io.Discard, "", 0)
	if opts.StartTLS {
		srv.TLSConfig = tlsConfig
	}
	s.srv = srv

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(s.ln)
	}()
	t.Cleanup(func() {
		close(s.closed)
		_ = srv.Close()
		_ = s.ln.Close() // Close misses a listener that Serve has not registered yet
		<-done
	})
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// URL is an smtp:// (or smtps://) URL for COUNTERSIGN_SMTP_URL that reaches
// this server with its credentials and TLS settings.
func (s *Server) URL() string {
	u := url.URL{Scheme: "smtp", Host: s.Addr()}
	if s.opts.ImplicitTLS {
		u.Scheme = "smtps"
	}
	if s.opts.Username != "" {
		u.User = url.UserPassword(s.opts.Username, s.opts.Password)
	}
	q := url.Values{}
	switch {
	case s.opts.ImplicitTLS:
		q.Set("insecure_skip_verify", "true")
	case s.opts.StartTLS:
		q.Set("tls", "mandatory")
		q.Set("insecure_skip_verify", "true")
	default:
		q.Set("tls", "none")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// SetFail changes how the server misbehaves from the next command on.
func (s *Server) SetFail(f Fail) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = f
}

func (s *Server) currentFail() Fail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail
}

// Messages returns every message body received so far, oldest first,
// whatever the server replied to it.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// WaitFor blocks until at least n messages were received or timeout
// passes, and returns the messages received so far. It returns an error
// on timeout.
func (s *Server) WaitFor(n int, timeout time.Duration) ([]Message, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if len(s.msgs) >= n {
			msgs := append([]Message(nil), s.msgs...)
			s.mu.Unlock()
			return msgs, nil
		}
		changed := s.changed
		got := len(s.msgs)
		s.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			return s.Messages(), fmt.Errorf("smtptest: got %d message(s) after %s, want %d", got, timeout, n)
		}
	}
}

// Stalled returns the message bodies received in full whose reply
// Fail.StallAfterData still holds back: mail the sender is sending right
// now, and cannot yet know to have been taken.
func (s *Server) Stalled() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.stalled...)
}

func (s *Server) stall(m Message, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.stalled = append(s.stalled, m)
		return
	}
	for i := range s.stalled {
		if s.stalled[i].At.Equal(m.At) && string(s.stalled[i].Data) == string(m.Data) {
			s.stalled = append(s.stalled[:i], s.stalled[i+1:]...)
			return
		}
	}
}

func (s *Server) record(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, m)
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	isTLS = isTLS || s.opts.ImplicitTLS // with implicit TLS the gate hides the *tls.Conn
	return &session{s: s, conn: c, tls: isTLS}, nil
}

// session is one SMTP connection's state.
type session struct {
	s        *Server
	conn     *smtp.Conn
	tls      bool
	username string
	from     string
	to       []string
}

var _ smtp.AuthSession = (*session)(nil)

func (ss *session) AuthMechanisms() []string {
	if ss.s.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain || ss.s.opts.Username == "" {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if identity != "" && identity != username {
			return smtp.ErrAuthFailed
		}
		if username != ss.s.opts.Username || password != ss.s.opts.Password {
			return smtp.ErrAuthFailed
		}
		ss.username = username
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.s.opts.Username != "" && ss.username == "" {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	for _, r := range ss.s.currentFail().RejectRcpt {
		if strings.EqualFold(r, to) {
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user here"}
		}
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m := Message{From: ss.from, To: append([]string(nil), ss.to...), Data: data,
		Username: ss.username, TLS: ss.tls, Outcome: Accepted, At: time.Now()}
	f := ss.s.currentFail()
	switch {
	case f.DropAfterData:
		m.Outcome = Dropped
		ss.s.record(m)
		_ = ss.conn.Conn().Close()
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "dropped"}
	case f.DataReply != 0:
		m.Outcome = Rejected
		ss.s.record(m)
		return &smtp.SMTPError{Code: f.DataReply, EnhancedCode: enhanced(f.DataReply), Message: "Message refused by smtptest"}
	case f.StallAfterData > 0:
		ss.s.stall(m, true)
		timer := time.NewTimer(f.StallAfterData)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ss.s.closed:
		}
		ss.s.stall(m, false)
	}
	ss.s.record(m)
	return nil
}

func (ss *session) Reset() {
	ss.from = ""
	ss.to = nil
}

func (ss *session) Logout() error { return nil }

func enhanced(code int) smtp.EnhancedCode {
	return smtp.EnhancedCode{code / 100, 0, 0}
}
