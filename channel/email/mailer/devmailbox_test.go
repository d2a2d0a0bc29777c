package mailer_test

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

func TestDevMailboxKeepsNewestFirst(t *testing.T) {
	box := mailer.NewDevMailbox(3)
	clock := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	box.SetClock(func() time.Time { return clock })
	for i := 1; i <= 5; i++ {
		m := testMessage()
		m.Subject = fmt.Sprintf("message %d", i)
		m.Date = time.Time{}
		accepted, err := box.Send(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(accepted), 3; got != want {
			t.Errorf("accepted %d, want %d", got, want)
		}
	}
	list := box.List()
	var got []string
	for _, m := range list {
		got = append(got, fmt.Sprintf("%d:%s", m.ID, m.Message.Subject))
	}
	if got, want := strings.Join(got, ","), "5:message 5,4:message 4,3:message 3"; got != want {
		t.Errorf("List = %q, want %q", got, want)
	}
	first := list[0]
	if got, want := first.ReceivedAt, clock; !got.Equal(want) {
		t.Errorf("ReceivedAt = %v, want %v", got, want)
	}
	if got, want := first.Message.Date, clock; !got.Equal(want) {
		t.Errorf("Message.Date = %v, want %v", got, want)
	}
	if got, want := first.Header.Get("Message-Id"), "<op_abc@countersign>"; got != want {
		t.Errorf("Header Message-Id = %q, want %q", got, want)
	}
	if got, want := first.Header.Get("Bcc"), ""; got != want {
		t.Errorf("Header Bcc = %q, want none", got)
	}
	if got, want := first.Message.Bcc[0].Address, "audit@corp.example"; got != want {
		t.Errorf("Message.Bcc = %q, want %q", got, want)
	}
	m := testMessage()
	m.Subject = "message 5"
	m.Date = clock
	checkRendered(t, first.Raw, m)

	if _, ok := box.Get(5); !ok {
		t.Error("Get(5) found nothing")
	}
	if _, ok := box.Get(1); ok {
		t.Error("Get(1) found a message that should have been dropped")
	}
}

func TestDevMailboxCopiesMessage(t *testing.T) {
	box := mailer.NewDevMailbox(0)
	m := testMessage()
	if _, err := box.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	m.To[0].Address = "changed@x.example"
	m.Headers["X-Countersign-Operation"] = "changed"
	m.ReplyTo.Address = "changed@x.example"
	kept := box.List()[0].Message
	if got, want := kept.To[0].Address, "jorg@client.example"; got != want {
		t.Errorf("kept To = %q, want %q", got, want)
	}
	if got, want := kept.Headers["X-Countersign-Operation"], "op_abc"; got != want {
		t.Errorf("kept header = %q, want %q", got, want)
	}
	if got, want := kept.ReplyTo.Address, "support@corp.example"; got != want {
		t.Errorf("kept Reply-To = %q, want %q", got, want)
	}
}

func TestDevMailboxRefuses(t *testing.T) {
	box := mailer.NewDevMailbox(10)
	bad := testMessage()
	bad.Subject = "x\r\nBcc: y@z.example"
	_, err := box.Send(context.Background(), bad)
	var se *mailer.SendError
	if !errors.As(err, &se) || se.Stage != mailer.StageMessage || se.OutcomeUnknown {
		t.Errorf("Send(bad) error = %v, want a message-stage error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := box.Send(ctx, testMessage()); err == nil {
		t.Error("Send with a canceled context succeeded")
	}
	if got := len(box.List()); got != 0 {
		t.Errorf("kept %d messages, want 0", got)
	}
}

func TestDevMailboxConcurrent(t *testing.T) {
	box := mailer.NewDevMailbox(20)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				m := &mailer.Message{From: mail.Address{Address: "a@localhost"},
					To: []mail.Address{{Address: "b@x.example"}}, Subject: "s", Text: "t\n"}
				if _, err := box.Send(context.Background(), m); err != nil {
					t.Error(err)
				}
				_ = box.List()
			}
		}()
	}
	wg.Wait()
	list := box.List()
	if got, want := len(list), 20; got != want {
		t.Fatalf("kept %d, want %d", got, want)
	}
	for i := 1; i < len(list); i++ {
		if list[i-1].ID <= list[i].ID {
			t.Fatalf("List not newest first at %d: %d then %d", i, list[i-1].ID, list[i].ID)
		}
	}
	if got, want := list[0].ID, 80; got != want {
		t.Errorf("newest ID = %d, want %d", got, want)
	}
}

// The development mailbox renders the same bytes the SMTP sender transmits.
func TestDevMailboxMatchesWire(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	box := mailer.NewDevMailbox(1)
	m := &mailer.Message{From: mail.Address{Name: "Countersign", Address: "countersign@localhost"},
		To: []mail.Address{{Name: "Zoë", Address: "zoe@client.example"}}, Subject: "Grüße", Text: "Hallo Zoë\n",
		MessageID: "op_x@countersign", Headers: map[string]string{"X-Countersign-Operation": "op_x"},
		Date: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := box.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if _, err := sender(t, srv.URL()).Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	msgs, err := srv.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(box.List()[0].Raw), string(msgs[0].Data); got != want {
		t.Errorf("dev mailbox raw\n%s\nwire\n%s", got, want)
	}
}
