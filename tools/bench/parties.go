package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/valyala/fasthttp"
)

// The outside parties of the loop, played on loopback: the humans (a
// webhook receiver that gets each approver's link, the way a team routes
// approvals into its own tool) and the recipients' mail server (an SMTP
// sink that accepts every message and notes which operation sent it).

// arrival is what reached a party for one operation, and when.
type arrival struct {
	link    chan string // the approval link, from the webhook
	linkAt  time.Time
	mailed  chan struct{} // closed when its email was accepted
	mailAt  time.Time
	mu      sync.Mutex
	gotLink bool
	gotMail bool
}

// parties routes arrivals to the loop waiting for that operation.
type parties struct {
	mu  sync.Mutex
	ops map[string]*arrival

	hookAddr, smtpAddr string
	hook               *fasthttp.Server
	hookLn             net.Listener
	sink               *smtp.Server
	mails              int64
}

func (p *parties) get(op string) *arrival {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.ops[op]
	if !ok {
		a = &arrival{link: make(chan string, 1), mailed: make(chan struct{})}
		p.ops[op] = a
	}
	return a
}

func (p *parties) forget(op string) {
	p.mu.Lock()
	delete(p.ops, op)
	p.mu.Unlock()
}

// startParties listens on two free loopback ports.
func startParties() (*parties, error) {
	p := &parties{ops: map[string]*arrival{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.hookLn, p.hookAddr = ln, ln.Addr().String()
	p.hook = &fasthttp.Server{Handler: p.webhook, ReadTimeout: 10 * time.Second}
	go func() { _ = p.hook.Serve(ln) }()

	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return nil, err
	}
	p.smtpAddr = sl.Addr().String()
	p.sink = smtp.NewServer(sinkBackend{p})
	p.sink.Domain, p.sink.AllowInsecureAuth = "localhost", true
	p.sink.ReadTimeout, p.sink.WriteTimeout = 10*time.Second, 10*time.Second
	go func() { _ = p.sink.Serve(sl) }()
	return p, nil
}

func (p *parties) close() {
	_ = p.hook.Shutdown()
	_ = p.sink.Close()
}

// webhook receives countersign's webhook channel: an approval_requested
// notification carries one approver's link.
func (p *parties) webhook(ctx *fasthttp.RequestCtx) {
	var n struct {
		Type         string `json:"type"`
		OperationKey string `json:"operation_key"`
		ApprovalURL  string `json:"approval_url"`
	}
	if json.Unmarshal(ctx.PostBody(), &n) == nil && n.Type == "approval_requested" && n.ApprovalURL != "" {
		a := p.get(n.OperationKey)
		a.mu.Lock()
		if !a.gotLink {
			a.gotLink, a.linkAt = true, time.Now()
			a.link <- n.ApprovalURL
		}
		a.mu.Unlock()
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

type sinkBackend struct{ p *parties }

func (b sinkBackend) NewSession(*smtp.Conn) (smtp.Session, error) { return &sinkSession{p: b.p}, nil }

type sinkSession struct{ p *parties }

func (s *sinkSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *sinkSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *sinkSession) Reset()                               {}
func (s *sinkSession) Logout() error                        { return nil }

var opHeader = []byte("\nX-Countersign-Operation: ")

// Data accepts the message; the time noted is when the whole message has
// been read, just before the server answers 250.
func (s *sinkSession) Data(r io.Reader) error {
	msg, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	now := time.Now()
	s.p.mu.Lock()
	s.p.mails++
	s.p.mu.Unlock()
	if i := bytes.Index(msg, opHeader); i >= 0 {
		rest := msg[i+len(opHeader):]
		if j := bytes.IndexAny(rest, "\r\n"); j > 0 {
			a := s.p.get(string(rest[:j]))
			a.mu.Lock()
			if !a.gotMail {
				a.gotMail, a.mailAt = true, now
				close(a.mailed)
			}
			a.mu.Unlock()
		}
	}
	return nil
}
