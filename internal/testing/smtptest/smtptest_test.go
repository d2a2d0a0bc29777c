package smtptest_test

import (
	"crypto/tls"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

const raw = "From: a@x.example\r\nTo: b@y.example\r\nSubject: hi\r\n\r\nhello\r\n"

// send runs one SMTP transaction with go-smtp's client and reports the
// stage that failed ("" when all went well) and its error.
func send(t *testing.T, c *smtp.Client, from string, to []string, body string) (string, error) {
	t.Helper()
	if err := c.Mail(from, nil); err != nil {
		return "mail", err
	}
	for _, r := range to {
		if err := c.Rcpt(r, nil); err != nil {
			return "rcpt", err
		}
	}
	w, err := c.Data()
	if err != nil {
		return "data", err
	}
	if _, err := w.Write([]byte(body)); err != nil {
		return "write", err
	}
	if err := w.Close(); err != nil {
		return "close", err
	}
	return "", nil
}

func dial(t *testing.T, s *smtptest.Server) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(s.Addr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func smtpCode(err error) int {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

func TestAcceptsAndRecords(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{})
	c := dial(t, s)
	if stage, err := send(t, c, "a@x.example", []string{"b@y.example", "c@y.example"}, raw); err != nil {
		t.Fatalf("%s: %v", stage, err)
	}
	msgs, err := s.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := msgs[0]
	if got, want := m.From, "a@x.example"; got != want {
		t.Errorf("From = %q, want %q", got, want)
	}
	if got, want := strings.Join(m.To, ","), "b@y.example,c@y.example"; got != want {
		t.Errorf("To = %q, want %q", got, want)
	}
	if got, want := string(m.Data), raw; got != want {
		t.Errorf("Data = %q, want %q", got, want)
	}
	if got, want := m.Outcome, smtptest.Accepted; got != want {
		t.Errorf("Outcome = %q, want %q", got, want)
	}
	if m.TLS || m.Username != "" {
		t.Errorf("TLS = %v, Username = %q; want plain and anonymous", m.TLS, m.Username)
	}
}

func TestWaitForTimesOut(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{})
	start := time.Now()
	msgs, err := s.WaitFor(1, 50*time.Millisecond)
	if err == nil {
		t.Fatal("WaitFor returned no error without any message")
	}
	if got, want := len(msgs), 0; got != want {
		t.Errorf("len(msgs) = %d, want %d", got, want)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("WaitFor returned after %s, before its timeout", d)
	}
}

func TestWaitForWakesOnArrival(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{})
	var wg sync.WaitGroup
	var got []smtptest.Message
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, werr = s.WaitFor(2, 10*time.Second)
	}()
	for i := 0; i < 2; i++ {
		c := dial(t, s)
		if stage, err := send(t, c, "a@x.example", []string{"b@y.example"}, raw); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
	}
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if got, want := len(got), 2; got != want {
		t.Errorf("len = %d, want %d", got, want)
	}
}

func TestAuth(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{Username: "user", Password: "s3cret"})
	tests := []struct {
		name      string
		auth      sasl.Client
		wantStage string
		wantCode  int
	}{
		{"none", nil, "mail", 502},
		{"wrong password", sasl.NewPlainClient("", "user", "nope"), "auth", 535},
		{"wrong user", sasl.NewPlainClient("", "other", "s3cret"), "auth", 535},
		{"right", sasl.NewPlainClient("", "user", "s3cret"), "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, s)
			stage, err := "", error(nil)
			if tt.auth != nil {
				if err = c.Auth(tt.auth); err != nil {
					stage = "auth"
				}
			}
			if err == nil {
				stage, err = send(t, c, "a@x.example", []string{"b@y.example"}, raw)
			}
			if got, want := stage, tt.wantStage; got != want {
				t.Fatalf("failed at %q (%v), want %q", got, err, want)
			}
			if got, want := smtpCode(err), tt.wantCode; got != want {
				t.Errorf("code = %d, want %d (%v)", got, want, err)
			}
		})
	}
	msgs := s.Messages()
	if got, want := len(msgs), 1; got != want {
		t.Fatalf("len(msgs) = %d, want %d", got, want)
	}
	if got, want := msgs[0].Username, "user"; got != want {
		t.Errorf("Username = %q, want %q", got, want)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name        string
		fail        smtptest.Fail
		to          []string
		wantStage   string
		wantCode    int
		wantRecords []smtptest.Outcome
	}{
		{"reject rcpt", smtptest.Fail{RejectRcpt: []string{"Bad@Y.example"}}, []string{"ok@y.example", "bad@y.example"}, "rcpt", 550, nil},
		{"reject rcpt other address passes", smtptest.Fail{RejectRcpt: []string{"bad@y.example"}}, []string{"ok@y.example"}, "", 0, []smtptest.Outcome{smtptest.Accepted}},
		{"data command 451", smtptest.Fail{DataCommand: 451}, []string{"ok@y.example"}, "data", 451, nil},
		{"data command 554", smtptest.Fail{DataCommand: 554}, []string{"ok@y.example"}, "data", 554, nil},
		{"data reply 452", smtptest.Fail{DataReply: 452}, []string{"ok@y.example"}, "close", 452, []smtptest.Outcome{smtptest.Rejected}},
		{"data reply 554", smtptest.Fail{DataReply: 554}, []string{"ok@y.example"}, "close", 554, []smtptest.Outcome{smtptest.Rejected}},
		{"drop after data", smtptest.Fail{DropAfterData: true}, []string{"ok@y.example"}, "close", 0, []smtptest.Outcome{smtptest.Dropped}},
		{"stall after data", smtptest.Fail{StallAfterData: 50 * time.Millisecond}, []string{"ok@y.example"}, "", 0, []smtptest.Outcome{smtptest.Accepted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := smtptest.Start(t, smtptest.Options{Fail: tt.fail})
			c := dial(t, s)
			stage, err := send(t, c, "a@x.example", tt.to, raw)
			if got, want := stage, tt.wantStage; got != want {
				t.Fatalf("failed at %q (%v), want %q", got, err, want)
			}
			if got, want := smtpCode(err), tt.wantCode; got != want {
				t.Errorf("code = %d, want %d (%v)", got, want, err)
			}
			var outcomes []smtptest.Outcome
			for _, m := range s.Messages() {
				outcomes = append(outcomes, m.Outcome)
			}
			if got, want := len(outcomes), len(tt.wantRecords); got != want {
				t.Fatalf("recorded %v, want %v", outcomes, tt.wantRecords)
			}
			for i := range outcomes {
				if got, want := outcomes[i], tt.wantRecords[i]; got != want {
					t.Errorf("outcome[%d] = %q, want %q", i, got, want)
				}
			}
		})
	}
}

func TestDataCommandRefusalKeepsSessionUsable(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{Fail: smtptest.Fail{DataCommand: 451}})
	c := dial(t, s)
	if stage, err := send(t, c, "a@x.example", []string{"b@y.example"}, raw); stage != "data" {
		t.Fatalf("failed at %q (%v), want data", stage, err)
	}
	if err := c.Reset(); err != nil {
		t.Fatalf("RSET: %v", err)
	}
	s.SetFail(smtptest.Fail{})
	if stage, err := send(t, c, "a@x.example", []string{"b@y.example"}, raw); err != nil {
		t.Fatalf("%s: %v", stage, err)
	}
	// A body line "DATA" is content, not a command, and must pass untouched.
	s.SetFail(smtptest.Fail{DataCommand: 451})
	body := "Subject: x\r\n\r\nDATA\r\n"
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	if stage, err := send(t, c, "a@x.example", []string{"b@y.example"}, body); stage != "data" {
		t.Fatalf("failed at %q (%v), want data", stage, err)
	}
	msgs := s.Messages()
	if got, want := len(msgs), 1; got != want {
		t.Fatalf("len = %d, want %d", got, want)
	}
}

func TestTLS(t *testing.T) {
	insecure := &tls.Config{InsecureSkipVerify: true}
	tests := []struct {
		name   string
		opts   smtptest.Options
		dial   func(addr string) (*smtp.Client, error)
		scheme string
		query  url.Values
	}{
		{"starttls", smtptest.Options{StartTLS: true, Fail: smtptest.Fail{DataCommand: 0}},
			func(a string) (*smtp.Client, error) { return smtp.DialStartTLS(a, insecure) },
			"smtp", url.Values{"tls": {"mandatory"}, "insecure_skip_verify": {"true"}}},
		{"implicit", smtptest.Options{ImplicitTLS: true},
			func(a string) (*smtp.Client, error) { return smtp.DialTLS(a, insecure) },
			"smtps", url.Values{"insecure_skip_verify": {"true"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := smtptest.Start(t, tt.opts)
			c, err := tt.dial(s.Addr())
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			if stage, err := send(t, c, "a@x.example", []string{"b@y.example"}, raw); err != nil {
				t.Fatalf("%s: %v", stage, err)
			}
			msgs, err := s.WaitFor(1, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !msgs[0].TLS {
				t.Error("TLS = false, want true")
			}
			u, err := url.Parse(s.URL())
			if err != nil {
				t.Fatal(err)
			}
			if got, want := u.Scheme, tt.scheme; got != want {
				t.Errorf("URL scheme = %q, want %q", got, want)
			}
			if got, want := u.RawQuery, tt.query.Encode(); got != want {
				t.Errorf("URL query = %q, want %q", got, want)
			}
		})
	}
}

func TestURL(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{Username: "u@x", Password: "p:w/d"})
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	if got, want := u.User.Username()+"|"+pw, "u@x|p:w/d"; got != want {
		t.Errorf("userinfo = %q, want %q", got, want)
	}
	if got, want := u.Host, s.Addr(); got != want {
		t.Errorf("host = %q, want %q", got, want)
	}
	if got, want := u.Query().Get("tls"), "none"; got != want {
		t.Errorf("tls = %q, want %q", got, want)
	}
}

// TestStalledShowsMailInFlight: while the reply to a body is held back,
// Stalled lists it (a fault test reads whose mail is in flight there);
// once the reply goes out it is recorded and no longer stalled.
func TestStalledShowsMailInFlight(t *testing.T) {
	s := smtptest.Start(t, smtptest.Options{Fail: smtptest.Fail{StallAfterData: 300 * time.Millisecond}})
	done := make(chan error, 1)
	go func() {
		c := dial(t, s)
		_, err := send(t, c, "a@x.example", []string{"b@y.example"}, raw)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.Stalled()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the held-back message never showed as stalled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.Stalled()[0].To; len(got) != 1 || got[0] != "b@y.example" || len(s.Messages()) != 0 {
		t.Fatalf("stalled to %v, %d recorded", got, len(s.Messages()))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, m := len(s.Stalled()), len(s.Messages()); n != 0 || m != 1 {
		t.Errorf("after the reply: %d stalled, %d recorded; want 0 and 1", n, m)
	}
}
