package email_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

const fullInput = `{"to":["Ann Lee <ann@client.example>"],"cc":["\"Doe, Jane\" <jane@bücher.example>"],"bcc":["audit@corp.example"],` +
	`"reply_to":"Help <help@corp.example>","subject":"Quarterly report — Q3 ✓",` +
	`"text":"Hi Ann,\r\n\r\nthe report is attached in spirit. A long line that quoted-printable has to soft-break because it exceeds seventy-six characters.\r\n.\r\nLine after a lone dot.\r\n  indented = equals sign   ",` +
	`"html":"<p>Hi Ann,</p>\n<p>the <b>report</b> &amp; more — “quotes”.</p>"}`

// operation prepares input and stores it the way the service does: the
// canonical JSON of the normalized input, under a fresh key.
func operation(t *testing.T, a *email.Action, input string) (*approval.Operation, *approval.Prepared) {
	t.Helper()
	p, err := prepare(t, a, input)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := approval.Canonical(p.Input)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := approval.PayloadHash(email.Name, canon, "agent")
	if err != nil {
		t.Fatal(err)
	}
	return &approval.Operation{Key: approval.NewOperationKey(), Action: email.Name, Principal: "agent",
		Input: canon, PayloadHash: hash, Preview: p.Preview, Status: approval.StatusExecuting}, p
}

func smtpSender(t *testing.T, srv *smtptest.Server) mailer.Sender {
	t.Helper()
	cfg, err := mailer.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	return mailer.NewSMTP(cfg)
}

func field(p approval.Preview, name string) string {
	for _, f := range p.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

func TestExecuteSendsThePreview(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Username: "relay", Password: "relay-pw"})
	a := newAction(t, smtpSender(t, srv), email.Limits{})
	op, p := operation(t, a, fullInput)

	res, err := a.Execute(context.Background(), op)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := srv.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := msgs[0]
	if got, want := got.From, "agent@corp.example"; got != want {
		t.Errorf("envelope from = %q, want %q", got, want)
	}
	if got, want := strings.Join(got.To, ","), "ann@client.example,jane@xn--bcher-kva.example,audit@corp.example"; got != want {
		t.Errorf("envelope to = %q, want %q", got, want)
	}
	parsed, err := got.Parse()
	if err != nil {
		t.Fatal(err)
	}
	pv := p.Preview
	checks := []struct{ what, got, want string }{
		{"text", parsed.Text, field(pv, "text")},
		{"html", parsed.HTML, field(pv, "html")},
		{"subject", parsed.Subject, field(pv, "subject")},
		{"Message-ID", parsed.Header.Get("Message-Id"), "<" + op.Key + "@corp.example>"},
		{"X-Countersign-Operation", parsed.Header.Get("X-Countersign-Operation"), op.Key},
		{"Bcc header", parsed.Header.Get("Bcc"), ""},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	for _, h := range []struct{ header, field string }{{"From", "from"}, {"To", "to"}, {"Cc", "cc"}, {"Reply-To", "reply_to"}} {
		addrs, err := parsed.Addresses(h.header)
		if err != nil {
			t.Fatalf("%s: %v", h.header, err)
		}
		var shown []string
		for _, ad := range addrs {
			shown = append(shown, email.Address{Name: ad.Name, Address: ad.Address}.String())
		}
		if got, want := strings.Join(shown, ", "), field(pv, h.field); got != want {
			t.Errorf("%s header shows %q, preview %q", h.header, got, want)
		}
	}

	var result email.Result
	if err := json.Unmarshal(res, &result); err != nil {
		t.Fatal(err)
	}
	if got, want := string(res), `{"message_id":"<`+op.Key+`@corp.example>","accepted":["ann@client.example","jane@xn--bcher-kva.example","audit@corp.example"]}`; got != want {
		t.Errorf("result = %s, want %s", got, want)
	}

	// A manual retry of the same operation carries the same Message-ID.
	if _, err := a.Execute(context.Background(), op); err != nil {
		t.Fatal(err)
	}
	msgs, err = srv.WaitFor(2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	again, err := msgs[1].Parse()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := again.Header.Get("Message-Id"), parsed.Header.Get("Message-Id"); got != want {
		t.Errorf("retry Message-ID = %q, want %q", got, want)
	}
}

func TestExecuteTextOnly(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	a := newAction(t, smtpSender(t, srv), email.Limits{})
	op, p := operation(t, a, `{"to":["ann@client.example"],"subject":"S","text":"no newline at the end"}`)
	if _, err := a.Execute(context.Background(), op); err != nil {
		t.Fatal(err)
	}
	msgs, err := srv.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := msgs[0].Parse()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := parsed.Text, field(p.Preview, "text"); got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if got, want := parsed.Parts, 1; got != want {
		t.Errorf("parts = %d, want %d", got, want)
	}
}

func TestExecuteFailures(t *testing.T) {
	tests := []struct {
		name    string
		fail    smtptest.Fail
		unknown bool
		stage   string
	}{
		{"rcpt rejected", smtptest.Fail{RejectRcpt: []string{"jane@xn--bcher-kva.example"}}, false, "rcpt"},
		{"data command refused", smtptest.Fail{DataCommand: 554}, false, "data"},
		{"message refused after body", smtptest.Fail{DataReply: 554}, false, "data_end"},
		{"connection dropped after data", smtptest.Fail{DropAfterData: true}, true, "data_end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := smtptest.Start(t, smtptest.Options{Fail: tt.fail})
			a := newAction(t, smtpSender(t, srv), email.Limits{})
			op, _ := operation(t, a, fullInput)
			res, err := a.Execute(context.Background(), op)
			if res != nil {
				t.Errorf("result = %s, want none", res)
			}
			var ee *approval.ExecError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v (%T) is not *approval.ExecError", err, err)
			}
			if got, want := ee.Code, approval.CodeExecutionFailed; got != want {
				t.Errorf("Code = %q, want %q", got, want)
			}
			if got, want := ee.OutcomeUnknown, tt.unknown; got != want {
				t.Errorf("OutcomeUnknown = %v, want %v (%s)", got, want, ee.Message)
			}
			if got, want := ee.Details["stage"], tt.stage; got != want {
				t.Errorf("stage = %v, want %q", got, want)
			}
			if ee.Message == "" {
				t.Error("empty message")
			}
		})
	}
}

func TestExecuteErrorsCarryNoSecrets(t *testing.T) {
	const secret = "relay-SECRET-pw"
	srv := smtptest.Start(t, smtptest.Options{Username: "relay", Password: "other"})
	cfg, err := mailer.ParseURL("smtp://relay:" + secret + "@" + srv.Addr() + "?tls=none")
	if err != nil {
		t.Fatal(err)
	}
	a := newAction(t, mailer.NewSMTP(cfg), email.Limits{})
	op, _ := operation(t, a, fullInput)
	_, err = a.Execute(context.Background(), op)
	var ee *approval.ExecError
	if !errors.As(err, &ee) {
		t.Fatalf("error %v is not *approval.ExecError", err)
	}
	if ee.OutcomeUnknown {
		t.Error("OutcomeUnknown = true for a failed login")
	}
	detail, _ := json.Marshal(ee.Details)
	for _, s := range []string{ee.Message, ee.Error(), string(detail)} {
		if strings.Contains(s, secret) {
			t.Errorf("%q contains the SMTP password", s)
		}
	}
	if got := len(srv.Messages()); got != 0 {
		t.Errorf("server received %d messages", got)
	}
}

func TestExecuteRefusesBadStoredInput(t *testing.T) {
	box := mailer.NewDevMailbox(10)
	a := newAction(t, box, email.Limits{})
	good, _ := operation(t, a, `{"to":["ann@client.example"],"subject":"S","text":"t"}`)
	tests := []struct {
		name string
		op   *approval.Operation
	}{
		{"not json", &approval.Operation{Key: good.Key, Input: json.RawMessage(`{`)}},
		{"raw agent input instead of normalized", &approval.Operation{Key: good.Key, Input: json.RawMessage(`{"to":["ann@client.example"],"subject":"S","text":"t"}`)}},
		{"no recipients", &approval.Operation{Key: good.Key, Input: json.RawMessage(`{"from":{"address":"a@corp.example"},"subject":"S","text":"t\n"}`)}},
		{"bad key", &approval.Operation{Key: "op_NOT-A-KEY\r\nBcc: x", Input: good.Input}},
		{"header injection in stored subject", &approval.Operation{Key: good.Key, Input: json.RawMessage(`{"from":{"address":"a@corp.example"},"to":[{"address":"b@client.example"}],"subject":"S\r\nBcc: e@x.example","text":"t\n"}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Execute(context.Background(), tt.op)
			var ee *approval.ExecError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v is not *approval.ExecError", err)
			}
			if ee.OutcomeUnknown {
				t.Error("OutcomeUnknown = true, but nothing can have been sent")
			}
		})
	}
	if got := len(box.List()); got != 0 {
		t.Errorf("dev mailbox holds %d messages, want 0", got)
	}
}

func TestExecuteIntoDevMailbox(t *testing.T) {
	box := mailer.NewDevMailbox(10)
	a := newAction(t, box, email.Limits{})
	op, p := operation(t, a, fullInput)
	res, err := a.Execute(context.Background(), op)
	if err != nil {
		t.Fatal(err)
	}
	kept := box.List()
	if got, want := len(kept), 1; got != want {
		t.Fatalf("kept %d, want %d", got, want)
	}
	parsed, err := smtptest.Parse(kept[0].Raw)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := parsed.Text, field(p.Preview, "text"); got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if got, want := parsed.HTML, field(p.Preview, "html"); got != want {
		t.Errorf("html = %q, want %q", got, want)
	}
	if !strings.Contains(string(res), op.Key+"@corp.example") {
		t.Errorf("result %s lacks the message id", res)
	}
}

// An execution whose claim is lost (settled by an operator, or its lease
// ran out while paused) hands nothing to SMTP.
func TestExecuteLostClaimSendsNothing(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	a := newAction(t, smtpSender(t, srv), email.Limits{})
	op, _ := operation(t, a, `{"to":["ann@client.example"],"subject":"S","text":"hi"}`)
	ctx := approval.WithClaimCheck(context.Background(), func(context.Context) error {
		return &approval.ClaimLostError{Status: approval.StatusFailed}
	})
	_, err := a.Execute(ctx, op)
	var ee *approval.ExecError
	if !errors.As(err, &ee) || ee.OutcomeUnknown || ee.Details["phase"] != "fence" {
		t.Fatalf("error %v", err)
	}
	if _, err := srv.WaitFor(1, 300*time.Millisecond); err == nil {
		t.Fatal("the email was sent after the claim was lost")
	}
}
