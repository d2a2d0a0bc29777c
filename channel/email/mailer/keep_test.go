package mailer_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// TestSendKeepsTheConnection: messages one after another go over one
// connection; when the server has let it go, the next message notices
// before sending anything and goes over a new one, delivered once.
func TestSendKeepsTheConnection(t *testing.T) {
	for _, opts := range []smtptest.Options{{}, {StartTLS: true, Username: "user", Password: "pw"}} {
		srv := smtptest.Start(t, opts)
		s := sender(t, srv.URL())
		for i := range 3 {
			if _, err := s.Send(context.Background(), testMessage()); err != nil {
				t.Fatalf("message %d: %v", i+1, err)
			}
		}
		if got := srv.Connections(); got != 1 {
			t.Fatalf("%+v: 3 messages took %d connections, want 1", opts, got)
		}
		srv.DropConnections()
		if _, err := s.Send(context.Background(), testMessage()); err != nil {
			t.Fatalf("after the server dropped the connection: %v", err)
		}
		if got := srv.Connections(); got != 2 {
			t.Fatalf("%+v: %d connections after the drop, want 2", opts, got)
		}
		msgs, err := srv.WaitFor(4, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 4 {
			t.Fatalf("%+v: the server has %d messages, want 4 (each once)", opts, len(msgs))
		}
	}
}

// TestSendDoesNotKeepAFailedConnection: a connection on which a message
// failed is not used again.
func TestSendDoesNotKeepAFailedConnection(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Fail: smtptest.Fail{RejectRcpt: []string{"jane@client.example"}}})
	s := sender(t, srv.URL())
	for range 2 {
		if _, err := s.Send(context.Background(), testMessage()); err == nil {
			t.Fatal("a refused recipient did not fail the send")
		}
	}
	if got := srv.Connections(); got != 2 {
		t.Fatalf("2 failed messages took %d connections, want 2", got)
	}
}

// TestSendKeepsAConnectionPastItsDeadline: a connection kept longer than
// the timeout of one step (the deadline its last message set) is still
// used again, not found dead.
func TestSendKeepsAConnectionPastItsDeadline(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	s := sender(t, srv.URL())
	cfg := s.Config()
	cfg.Timeout = 100 * time.Millisecond
	s = mailer.NewSMTP(cfg)
	for i := range 2 {
		if i > 0 {
			time.Sleep(3 * cfg.Timeout) // past the deadline of the first message
		}
		if _, err := s.Send(context.Background(), testMessage()); err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
	if got := srv.Connections(); got != 1 {
		t.Fatalf("2 messages took %d connections, want 1", got)
	}
}
