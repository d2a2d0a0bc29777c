package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	actemail "github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/testing/openapitest"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/internal/testing/testkit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
)

// These tests run the client against the real REST and admin APIs (the
// service, its store on REDIS_URL or miniredis, the real email.send over a
// real SMTP server), and check every response against the OpenAPI
// description on the way.

const (
	svcAgentKey    = "cs_client_test_agent_key"
	svcOperatorKey = "cso_client_test_operator_key"
)

type inbox struct {
	mu    sync.Mutex
	links map[string]string // operation → link
}

func (b *inbox) Notify(_ context.Context, n approval.Notice) (map[string]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, tok, _ := strings.Cut(n.Link, "/a/")
	b.links[n.Message.OperationKey] = tok
	return map[string]string{}, nil
}

func (b *inbox) link(key string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.links[key]
}

type svcEnv struct {
	svc    *approval.Service
	url    string
	inbox  *inbox
	offset atomic.Int64 // added to the clock
	http   *http.Client
}

func startRealService(t *testing.T, smtp *smtptest.Server) *svcEnv {
	t.Helper()
	rdb, err := store.Open(redistest.Start(t).URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	st := store.New(rdb, nil)
	t.Cleanup(func() { st.Close() })
	cfg, err := mailer.ParseURL(smtp.URL())
	if err != nil {
		t.Fatal(err)
	}
	email, err := actemail.New(mailer.NewSMTP(cfg), mail.Address{Address: "countersign@example.com"}, actemail.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	hash := func(k string) string { return strings.TrimPrefix(approval.SHA256Hex([]byte(k)), "sha256:") }
	e := &svcEnv{inbox: &inbox{links: map[string]string{}}}
	policy := &approval.Policy{
		Principals: []*approval.Principal{{ID: "agent", KeyHash: hash(svcAgentKey), Scopes: []string{"*"}}},
		Operators:  []*approval.Operator{{ID: "oncall", KeyHash: hash(svcOperatorKey)}},
		Approvers:  []*approval.Approver{{ID: "grace", Email: "grace@example.com"}},
		Routes:     []approval.RouteRule{{Name: "all", ApproverIDs: []string{"grace"}, Notify: []string{"console"}}},
	}
	e.svc, err = approval.NewService(approval.Config{Store: st, Policy: policy, Actions: []approval.Action{email},
		Notifiers: map[string]approval.Notifier{"console": e.inbox}, Links: approval.RandomKeyring(),
		PublicURL: "http://countersign.test", Now: func() time.Time { return time.Now().Add(time.Duration(e.offset.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{Service: e.svc, Limiter: st, Ready: st.Ping, PublicURL: "http://countersign.test"})
	if err != nil {
		t.Fatal(err)
	}
	e.url = testkit.Serve(t, srv.App().Listener, srv.Shutdown)
	tr, err := openapitest.NewTransport(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.Watch(t, e.url)
	e.http = &http.Client{Transport: tr}
	t.Cleanup(func() {
		if tr.Checked() == 0 {
			t.Error("no response was checked against the OpenAPI description")
		}
	})
	return e
}

// approve is the human deciding through their link, and a worker running
// the operation.
func (e *svcEnv) approve(t *testing.T, key string) {
	t.Helper()
	if err := e.svc.Reconcile(context.Background(), approval.Ref{Key: key}); err != nil { // delivers the notice
		t.Fatal(err)
	}
	v, res, err := e.svc.DecideByLink(context.Background(), e.inbox.link(key), true, "")
	if err != nil || v.Problem != approval.LinkOK || res.Outcome != approval.DecideApproved {
		t.Fatalf("approve: %v %+v %v", v.Problem, res, err)
	}
}

var emailCall = approval.PrepareCall{Action: "email.send",
	Input: json.RawMessage(`{"to":["ada@client.example"],"subject":"Invoice","text":"Hi Ada"}`)}

func TestClientAgainstTheService(t *testing.T) {
	ctx := context.Background()
	smtp := smtptest.Start(t, smtptest.Options{})
	e := startRealService(t, smtp)
	c, err := client.New(e.url, svcAgentKey, &client.Options{HTTPClient: e.http})
	if err != nil {
		t.Fatal(err)
	}
	v, created, err := c.Prepare(ctx, emailCall)
	if err != nil || !created || v.Status != approval.StatusDraft {
		t.Fatalf("Prepare: %+v %v %v", v, created, err)
	}
	if _, created, _ := c.Prepare(ctx, approval.PrepareCall{Action: "email.send", Input: emailCall.Input, IdempotencyKey: "k1"}); !created {
		t.Error("first use of an idempotency key")
	}
	if again, created, err := c.Prepare(ctx, approval.PrepareCall{Action: "email.send", Input: emailCall.Input, IdempotencyKey: "k1"}); err != nil || created {
		t.Errorf("idempotent prepare: %v %v %v", again.OperationKey, created, err)
	}
	if v, err = c.Send(ctx, v.OperationKey); err != nil || v.Status != approval.StatusPending {
		t.Fatalf("Send: %+v %v", v, err)
	}
	e.approve(t, v.OperationKey)
	if err := e.svc.Reconcile(ctx, approval.Ref{Key: v.OperationKey}); err != nil { // executes
		t.Fatal(err)
	}
	if v, err = c.Get(ctx, v.OperationKey, time.Second); err != nil || v.Status != approval.StatusSucceeded {
		t.Fatalf("Get: %+v %v", v, err)
	}
	if evs, err := c.Events(ctx, v.OperationKey); err != nil || len(evs) < 5 {
		t.Errorf("Events: %v %v", evs, err)
	}
	if ops, err := c.List(ctx, approval.StatusSucceeded); err != nil || len(ops) != 1 {
		t.Errorf("List: %d %v", len(ops), err)
	}
	if _, _, err := c.PrepareUndo(ctx, v.OperationKey); approval.ErrorCode(err) != approval.CodeInvalidState {
		t.Errorf("undo of an email: %v", err)
	}
	if _, err := c.Cancel(ctx, v.OperationKey); approval.ErrorCode(err) != approval.CodeInvalidState {
		t.Errorf("cancel after success: %v", err)
	}
	if _, err := c.Get(ctx, "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", 0); approval.ErrorCode(err) != approval.CodeNotFound {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := c.List(ctx, "bogus"); approval.ErrorCode(err) != approval.CodeInvalidInput {
		t.Errorf("unknown status: %v", err)
	}
	if _, _, err := c.Prepare(ctx, approval.PrepareCall{Action: "email.send", Input: json.RawMessage(`{"to":[]}`)}); approval.ErrorCode(err) != approval.CodeInvalidInput {
		t.Errorf("bad input: %v", err)
	}
	if _, _, err := c.Prepare(ctx, approval.PrepareCall{Action: "fax.send", Input: json.RawMessage(`{}`)}); approval.ErrorCode(err) != approval.CodeUnknownAction {
		t.Errorf("unknown action: %v", err)
	}
	bad, _ := client.New(e.url, "cs_wrong", &client.Options{HTTPClient: e.http})
	if _, err := bad.List(ctx, ""); approval.ErrorCode(err) != approval.CodeUnauthenticated {
		t.Errorf("wrong key: %v", err)
	}
	asOperator, _ := client.New(e.url, svcOperatorKey, &client.Options{HTTPClient: e.http})
	if _, err := asOperator.List(ctx, ""); approval.ErrorCode(err) != approval.CodeUnauthenticated || !strings.Contains(err.Error(), "operator key") {
		t.Errorf("an operator key on the agent API: %v", err)
	}
}

func TestAdminAgainstTheService(t *testing.T) {
	ctx := context.Background()
	// The SMTP server sits on the message: execution hangs, as it would
	// if the process running it had stopped mid-write.
	smtp := smtptest.Start(t, smtptest.Options{Fail: smtptest.Fail{StallAfterData: 5 * time.Second}})
	e := startRealService(t, smtp)
	agent, _ := client.New(e.url, svcAgentKey, &client.Options{HTTPClient: e.http})
	a, err := client.NewAdmin(e.url, svcOperatorKey, &client.Options{HTTPClient: e.http})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.NewAdmin(e.url, "", nil); err == nil || !strings.Contains(err.Error(), "operator key") {
		t.Errorf("NewAdmin without a key: %v", err)
	}
	draft, _, _ := agent.Prepare(ctx, emailCall)
	hung, _, _ := agent.Prepare(ctx, approval.PrepareCall{Action: "email.send", Input: json.RawMessage(`{"to":["bo@client.example"],"subject":"Hi","text":"Hi"}`)})
	if _, err := agent.Send(ctx, hung.OperationKey); err != nil {
		t.Fatal(err)
	}

	ops, err := a.List(ctx, client.AdminQuery{})
	if err != nil || len(ops) != 2 || ops[0].Principal != "agent" || ops[0].Route != "all" {
		t.Fatalf("List: %+v %v", ops, err)
	}
	if ops, err := a.List(ctx, client.AdminQuery{Status: approval.StatusDraft, Principal: "agent"}); err != nil || len(ops) != 1 || ops[0].OperationKey != draft.OperationKey {
		t.Errorf("List draft: %+v %v", ops, err)
	}
	if _, err := a.List(ctx, client.AdminQuery{Status: "bogus"}); approval.ErrorCode(err) != approval.CodeInvalidInput {
		t.Errorf("List bogus: %v", err)
	}
	if v, err := a.Cancel(ctx, draft.OperationKey); err != nil || v.Status != approval.StatusCanceled {
		t.Errorf("Cancel: %+v %v", v, err)
	}
	if _, err := a.Cancel(ctx, draft.OperationKey); err != nil {
		t.Errorf("Cancel again (no change): %v", err)
	}

	e.approve(t, hung.OperationKey)
	ran := make(chan error, 1)
	go func() { ran <- e.svc.Reconcile(context.Background(), approval.Ref{Key: hung.OperationKey}) }()
	deadline := time.Now().Add(5 * time.Second)
	for v, _ := agent.Get(ctx, hung.OperationKey, 0); v.Status != approval.StatusExecuting; v, _ = agent.Get(ctx, hung.OperationKey, 0) {
		if time.Now().After(deadline) {
			t.Fatalf("never executing: %s", v.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if stuck, err := a.List(ctx, client.AdminQuery{Stuck: true}); err != nil || len(stuck) != 0 {
		t.Errorf("stuck before the threshold: %+v %v", stuck, err)
	}
	e.offset.Add(int64(2 * time.Minute))
	if stuck, err := a.List(ctx, client.AdminQuery{Stuck: true}); err != nil || len(stuck) != 0 {
		t.Errorf("stuck 2 minutes in, before the default threshold: %+v %v", stuck, err)
	}
	if stuck, err := a.List(ctx, client.AdminQuery{Stuck: true, OlderThan: time.Minute}); err != nil || len(stuck) != 1 {
		t.Errorf("stuck with a threshold of a minute: %+v %v", stuck, err)
	}
	e.offset.Add(int64(approval.DefaultStuckAfter))
	stuck, err := a.List(ctx, client.AdminQuery{Stuck: true})
	if err != nil || len(stuck) != 1 || !stuck[0].Stuck || !strings.Contains(stuck[0].NextStep, "outcome is unknown") {
		t.Fatalf("stuck: %+v %v", stuck, err)
	}
	if _, err := a.Reconcile(ctx, hung.OperationKey, approval.StatusFailed, " "); approval.ErrorCode(err) != approval.CodeInvalidInput {
		t.Errorf("Reconcile without a note: %v", err)
	}
	// The executor still holds its lease (it is hung, not dead): failed is
	// refused, and only unknown settles it now (issue 20, fencing).
	if _, err := a.Reconcile(ctx, hung.OperationKey, approval.StatusFailed, "the mailbox has no such message"); approval.ErrorCode(err) != approval.CodeInvalidState {
		t.Errorf("Reconcile failed while the lease is live: %v", err)
	}
	v, err := a.Reconcile(ctx, hung.OperationKey, approval.OutcomeUnknown, "the mailbox has no such message")
	if err != nil || v.Status != approval.StatusFailed || v.Error == nil || v.Error.OutcomeUnknown == nil || !*v.Error.OutcomeUnknown {
		t.Fatalf("Reconcile: %+v %v", v, err)
	}
	op, evs, err := a.Show(ctx, hung.OperationKey)
	if err != nil || op.Status != approval.StatusFailed || evs[len(evs)-1].Actor != "operator:oncall" {
		t.Errorf("Show: %+v %v %v", op, evs, err)
	}
	if _, _, err := a.Show(ctx, "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"); approval.ErrorCode(err) != approval.CodeNotFound {
		t.Errorf("Show unknown: %v", err)
	}
	asAgent, _ := client.NewAdmin(e.url, svcAgentKey, &client.Options{HTTPClient: e.http})
	if _, err := asAgent.List(ctx, client.AdminQuery{}); approval.ErrorCode(err) != approval.CodeUnauthenticated {
		t.Errorf("an agent's key on the admin API: %v", err)
	}
	if err := <-ran; err != nil {
		t.Logf("the hung execution ended: %v", err)
	}
	if v, _ := agent.Get(ctx, hung.OperationKey, 0); v.Status != approval.StatusFailed {
		t.Errorf("the operator's settlement was overwritten: %s", v.Status)
	}
}
