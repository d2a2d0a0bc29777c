package teams_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/teams"
	"github.com/countersign/countersign/internal/testing/faketeams"
)

var bg = context.Background()

func connector(t *testing.T, fake *faketeams.Server, password string) *teams.Connector {
	t.Helper()
	c, err := teams.NewConnector(teams.ConnectorConfig{ServiceURL: fake.ServiceURL(), LoginURL: fake.LoginURL(),
		AppID: fake.AppID, Password: password, TenantID: fake.TenantID})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func notice(target string, a *approval.Approver) approval.Notice {
	return approval.Notice{Job: approval.Job{ID: "teams:x", Channel: "teams", Target: target}, Approver: a,
		Message: approval.Message{OperationKey: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: "email.send", Title: "Hello",
			PayloadHash: "sha256:" + strings.Repeat("ab", 32), Required: 1, Status: approval.StatusPending, Outcome: "Waiting."}}
}

// The token is fetched once and reused; one the connector refuses is
// dropped, and the next call logs in again.
func TestTokenIsReusedAndRenewedWhenRefused(t *testing.T) {
	fake := faketeams.New(t)
	n := teams.New(teams.Config{Connector: connector(t, fake, fake.Password)})
	grace := &approval.Approver{ID: "grace", TeamsUserID: "29:grace"}
	for range 3 {
		if _, err := n.Notify(bg, notice("", grace)); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(fake.Calls("login")); got != 1 {
		t.Fatalf("%d logins", got)
	}
	if got := len(fake.Calls("create conversation")); got != 1 {
		t.Fatalf("the 1:1 chat was created %d times", got)
	}
	fake.ExpireTokens()
	_, err := n.Notify(bg, notice("", grace))
	var ra *approval.RetryAfterError
	if !errors.As(err, &ra) || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("refused token: %v", err)
	}
	if _, err := n.Notify(bg, notice("", grace)); err != nil {
		t.Fatalf("after logging in again: %v", err)
	}
	if got := len(fake.Calls("login")); got != 2 {
		t.Fatalf("%d logins", got)
	}
}

// Failures become what the worker needs, and never carry the password.
func TestErrorsAreClassified(t *testing.T) {
	fake := faketeams.New(t)
	wrong := teams.New(teams.Config{Connector: connector(t, fake, "not-the-password-s3cr3t")})
	_, err := wrong.Notify(bg, notice("19:c@thread.tacv2", nil))
	var ra *approval.RetryAfterError
	if !errors.As(err, &ra) || ra.After < time.Minute || !strings.Contains(err.Error(), "login: HTTP 401 invalid_client") ||
		!strings.Contains(err.Error(), "check TEAMS_APP_ID, TEAMS_APP_PASSWORD") || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("wrong password: %v", err)
	}

	n := teams.New(teams.Config{Connector: connector(t, fake, fake.Password)})
	fake.Fail("create conversation", 1, faketeams.Failure{Status: 429, RetryAfter: 7 * time.Second})
	if _, err = n.Notify(bg, notice("19:c@thread.tacv2", nil)); !errors.As(err, &ra) || ra.After != 7*time.Second {
		t.Fatalf("429: %v", err)
	}
	fake.Fail("create conversation", 1, faketeams.Failure{Status: 502})
	if _, err = n.Notify(bg, notice("19:c@thread.tacv2", nil)); err == nil || errors.As(err, &ra) || !strings.Contains(err.Error(), "HTTP 502") {
		t.Fatalf("502: %v", err)
	}
	if _, err = n.Notify(bg, notice("", &approval.Approver{ID: "nobody"})); err == nil || !strings.Contains(err.Error(), "no teams_user_id") {
		t.Fatalf("no id: %v", err)
	}
	// A channel post, then its card is gone: an update gives up quietly.
	h, err := n.Notify(bg, notice("19:c@thread.tacv2", nil))
	if err != nil {
		t.Fatal(err)
	}
	d := approval.Delivery{Job: "teams:x", Channel: "teams", Handle: h}
	m := notice("", nil).Message
	m.Status = approval.StatusCanceled
	if err := n.Update(bg, d, m); err != nil {
		t.Fatal(err)
	}
	if a, ok := fake.Activity(h["conversation"], h["activity"]); !ok || a.Updates != 1 || len(faketeams.Verbs(&a.Card)) != 0 {
		t.Fatalf("updated card %+v", a)
	}
	d.Handle = map[string]string{"conversation": h["conversation"], "activity": "1799999999999"}
	if err := n.Update(bg, d, m); err != nil {
		t.Fatalf("update of a missing card: %v", err)
	}
}

func TestConfigIsChecked(t *testing.T) {
	for _, cfg := range []teams.ConnectorConfig{
		{AppID: "a"},
		{AppID: "a", Password: "p", ServiceURL: "ftp://x/"},
		{AppID: "a", Password: "p", LoginURL: "https://user:pw@login.example/"},
		{AppID: "a", Password: "p", ServiceURL: "https://smba.example/?x=1"},
	} {
		if _, err := teams.NewConnector(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("error shows a credential: %v", err)
		}
	}
}

// Edits of one card are serialized and never go back: an older read of
// the operation (approved) whose request is slow cannot land after a later
// one (succeeded), nor be sent after it.
func TestCardEditsNeverGoBack(t *testing.T) {
	fake := faketeams.New(t)
	n := teams.New(teams.Config{Connector: connector(t, fake, fake.Password)})
	h, err := n.Notify(bg, notice("19:c@thread.tacv2", nil))
	if err != nil {
		t.Fatal(err)
	}
	d := approval.Delivery{Job: "teams:x", Channel: "teams", Handle: h}
	at := func(st approval.Status, outcome string) approval.Message {
		m := notice("", nil).Message
		m.Status, m.Outcome = st, outcome
		m.Approvals = []approval.DecisionView{{Name: "Grace", Via: "teams", At: time.Now()}}
		return m
	}
	fake.Fail("update activity", 1, faketeams.Failure{Delay: 300 * time.Millisecond}) // the first edit is slow
	done := make(chan error)
	go func() { done <- n.Update(bg, d, at(approval.StatusApproved, "Approved. Waiting to run.")) }()
	time.Sleep(50 * time.Millisecond)
	if err := n.Update(bg, d, at(approval.StatusSucceeded, "Done: it ran successfully.")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := n.Update(bg, d, at(approval.StatusApproved, "Approved. Waiting to run.")); err != nil {
		t.Fatal(err)
	}
	a, _ := fake.Activity(h["conversation"], h["activity"])
	if !strings.Contains(faketeams.Text(&a.Card), "Done: it ran successfully.") || a.Updates != 2 {
		t.Fatalf("after %d updates the card shows:\n%s", a.Updates, faketeams.Text(&a.Card))
	}
}
