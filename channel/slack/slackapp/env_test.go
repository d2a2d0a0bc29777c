package slackapp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
	notifyslack "github.com/countersign/countersign/channel/slack"
	"github.com/countersign/countersign/channel/slack/slackapp"
	"github.com/countersign/countersign/internal/httpbody"
	"github.com/countersign/countersign/internal/testing/fakeslack"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
	"github.com/gofiber/fiber/v2"
	"github.com/slack-go/slack"
)

// The service under test: approval.Service on Redis with the real Slack
// channel, action and interaction handler, all talking to a fake Slack,
// plus an "email" channel that keeps each approver's link (the approval
// page decides through the same DecideByLink).

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

var bg = context.Background()

// Slack users of the test workspace.
const (
	grace    = "U0GRACE"
	ada      = "U0ADA"
	sam      = "U0SAM" // the human the agent works for
	eve      = "U0EVE" // an approver, but not on the route
	stranger = "U0STRANGER"
)

type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.off += d; c.mu.Unlock() }

// inbox is the email channel: it keeps what it was asked to deliver.
type inbox struct {
	mu      sync.Mutex
	notices []approval.Notice
	at      []time.Time
	// slow, when set, delays deliveries to one approver (a slow mail server).
	slow      string
	slowDelay time.Duration
}

func (b *inbox) Notify(_ context.Context, n approval.Notice) (map[string]string, error) {
	if b.slow != "" && n.Approver != nil && n.Approver.ID == b.slow {
		time.Sleep(b.slowDelay)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notices = append(b.notices, n)
	b.at = append(b.at, time.Now())
	return nil, nil
}

// link waits for the link sent to approver about key.
func (b *inbox) link(t testing.TB, key, approver string) (string, time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		for i, n := range b.notices {
			if n.Message.OperationKey == key && n.Approver != nil && n.Approver.ID == approver {
				link, at := n.Link, b.at[i]
				b.mu.Unlock()
				return link[strings.LastIndex(link, "/a/")+3:], at
			}
		}
		b.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no email to %s about %s", approver, key)
	return "", time.Time{}
}

type opts struct {
	required   int
	forbidSelf bool
	notify     []string
	workers    int
	// slowEmailTo delays email deliveries to this approver by 300 ms.
	slowEmailTo string
	// claimIdle is how long a task may sit with a worker before another
	// takes it over (default 500 ms; production's is a minute).
	claimIdle time.Duration
	// allowEdit lets approvers edit as a new version (allow_edit).
	allowEdit bool
	// socket receives interactions over Socket Mode (with an app token
	// and no signing secret) instead of HTTP.
	socket bool
	// logger receives the handler's log (discarded when nil).
	logger *slog.Logger
	// stepUp puts the route under step_up: passkey (no passkeys are set up).
	stepUp bool
}

type env struct {
	svc     *approval.Service
	store   *store.Redis
	fake    *fakeslack.Server
	app     *fiber.App
	handler *slackapp.Handler
	email   *inbox
	agent   *approval.Principal
	clock   *clock
	events  chan approval.Event
}

func newEnv(t testing.TB, o opts) *env {
	t.Helper()
	if o.required == 0 {
		o.required = 1
	}
	if o.notify == nil {
		o.notify = []string{"slack:#approvals", "email"}
	}
	if o.workers == 0 {
		o.workers = 2
	}
	rdb := redistest.Start(t).Client(t)
	e := &env{store: store.New(rdb, nil), fake: fakeslack.New(t), email: &inbox{slow: o.slowEmailTo, slowDelay: 300 * time.Millisecond}, clock: &clock{},
		events: make(chan approval.Event, 10000)}
	e.store.Block = 100 * time.Millisecond
	e.store.ClaimIdle = 500 * time.Millisecond
	if o.claimIdle != 0 {
		e.store.ClaimIdle = o.claimIdle
	}
	t.Cleanup(func() { _ = e.store.Close() })
	e.agent = &approval.Principal{ID: "support-agent", Scopes: []string{"slack.post_message"}, OnBehalfOf: "sam"}
	policy := &approval.Policy{
		Principals: []*approval.Principal{e.agent},
		Approvers: []*approval.Approver{
			{ID: "grace", Name: "Grace Park", Email: "grace@example.com", SlackUserID: grace},
			{ID: "ada", Name: "Ada Lovelace", Email: "ada@example.com", SlackUserID: ada},
			{ID: "sam", Name: "Sam Lee", Email: "sam@example.com", SlackUserID: sam},
			{ID: "eve", Name: "Eve Moss", Email: "eve@example.com", SlackUserID: eve},
		},
		Routes: []approval.RouteRule{{Name: "slack", Match: approval.Match{Action: "slack.*"},
			ApproverIDs: []string{"grace", "ada", "sam"}, Required: o.required, Notify: o.notify,
			ForbidSelfApproval: o.forbidSelf, AllowEdit: o.allowEdit, StepUp: stepUp(o.stepUp)},
			{Name: "allowances", Match: approval.Match{Action: approval.GrantAction},
				ApproverIDs: []string{"grace", "ada"}, Required: 1, Notify: o.notify}},
	}
	api := e.fake.Client("xoxb-test")
	slackCfg := slackpost.Config{Client: api}
	svc, err := approval.NewService(approval.Config{
		Store: e.store, Policy: policy, Links: approval.RandomKeyring(), PublicURL: "http://countersign.test",
		Actions:   []approval.Action{slackpost.New(slackCfg), slackpost.NewDelete(slackCfg)},
		Notifiers: map[string]approval.Notifier{"slack": notifyslack.New(notifyslack.Config{Client: api}), "email": e.email},
		Now:       e.clock.Now,
		OnEvent:   []func(approval.Event){func(ev approval.Event) { e.events <- ev }},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	signing := secret
	if o.socket {
		signing = ""
	}
	e.handler, err = slackapp.New(slackapp.Config{Service: svc, SigningSecret: signing, Client: api, Replays: e.store,
		TeamID: e.fake.TeamID, Logger: o.logger})
	if err != nil {
		t.Fatal(err)
	}
	e.app = fiber.New(fiber.Config{DisableStartupMessage: true, StreamRequestBody: true})    // as countersign serve does
	e.app.Use(func(c *fiber.Ctx) error { defer httpbody.Finish(c, 1<<20); return c.Next() }) // as web's gate does
	e.app.Post("/slack/interactions", e.handler.Handle)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); svc.RunWorkers(ctx, e.store, "w", o.workers) }()
	go func() { defer wg.Done(); svc.RunTimers(ctx, e.store, 20*time.Millisecond) }()
	if o.socket {
		e.fake.AppToken = "xapp-1-A0FAKE-test"
		sm := slackapp.NewSocketClient(slack.New("xoxb-test", slack.OptionAPIURL(e.fake.URL()), slack.OptionAppLevelToken(e.fake.AppToken)), nil)
		wg.Add(1)
		go func() { defer wg.Done(); e.handler.RunSocket(ctx, sm) }()
		e.fake.WaitSocket(t, 1)
	}
	t.Cleanup(func() { cancel(); wg.Wait(); e.handler.Close() })
	return e
}

func stepUp(on bool) string {
	if on {
		return approval.StepUpPasskey
	}
	return ""
}

// prepareSend prepares a slack.post_message and sends it for approval.
func (e *env) prepareSend(t testing.TB, text string) *approval.Operation {
	t.Helper()
	in, _ := json.Marshal(map[string]string{"channel": "#general", "text": text})
	op, _, err := e.svc.Prepare(bg, e.agent, approval.PrepareCall{Action: slackpost.Name, Input: in})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if op, err = e.svc.Send(bg, e.agent, op.Key); err != nil {
		t.Fatalf("send: %v", err)
	}
	return op
}

// approvalMessages waits for the n approval messages of op, and for their
// deliveries to be recorded (as a human's click would, seconds later).
func (e *env) approvalMessages(t testing.TB, key string, n int) []fakeslack.Message {
	t.Helper()
	var found []fakeslack.Message
	e.fake.Wait(t, 15*time.Second, "the approval message of "+key, func() bool {
		found = nil
		for _, m := range e.fake.Messages("") {
			if m.Metadata != nil && m.Metadata.EventType == notifyslack.EventType && m.Metadata.EventPayload["operation_key"] == key {
				found = append(found, m)
			}
		}
		return len(found) >= n
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		op, err := e.svc.Get(bg, nil, key)
		if err != nil {
			t.Fatal(err)
		}
		recorded := 0
		for _, d := range op.Deliveries {
			if d.Channel == "slack" {
				recorded++
			}
		}
		if recorded >= n {
			return found
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Slack deliveries of %s recorded", recorded, n, key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// message returns the current state of a message.
func (e *env) message(t testing.TB, m fakeslack.Message) fakeslack.Message {
	t.Helper()
	cur, ok := e.fake.Message(m.Channel, m.TS)
	if !ok {
		t.Fatalf("message %s/%s is gone", m.Channel, m.TS)
	}
	return cur
}

// waitMessage waits until the message satisfies cond.
func (e *env) waitMessage(t testing.TB, m fakeslack.Message, what string, cond func(fakeslack.Message) bool) fakeslack.Message {
	t.Helper()
	var cur fakeslack.Message
	e.fake.Wait(t, 15*time.Second, what, func() bool {
		cur, _ = e.fake.Message(m.Channel, m.TS)
		return cond(cur)
	})
	return cur
}

// clickRequest is a signed click by user on a button of m.
func clickRequest(user, actionID string, m fakeslack.Message, mutate func(*fakeslack.Click)) []byte {
	c := fakeslack.Click{UserID: user, TeamID: "T0FAKE", ActionID: actionID, BlockID: m.ActionBlockID(),
		ChannelID: m.Channel, MessageTS: m.TS}
	if b := m.Button(actionID); b != nil {
		c.Value = b.Value
	}
	if mutate != nil {
		mutate(&c)
	}
	return fakeslack.FormBody(fakeslack.BlockActions(c))
}

// post sends a signed interaction body and returns the status and body.
func (e *env) post(t testing.TB, body []byte, at time.Time, key string) (int, string) {
	t.Helper()
	req := fakeslack.SignedRequest("http://countersign.test/slack/interactions", key, at, body)
	return e.do(t, req)
}

func (e *env) do(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	resp, err := e.app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// click posts a signed click and expects it acknowledged.
func (e *env) click(t testing.TB, user, actionID string, m fakeslack.Message) {
	t.Helper()
	if st, body := e.post(t, clickRequest(user, actionID, m, nil), time.Now(), secret); st != 200 {
		t.Fatalf("click: %d %s", st, body)
	}
}

// waitStatus polls until the operation reaches want.
func (e *env) waitStatus(t testing.TB, key string, want approval.Status) *approval.Operation {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		op, err := e.svc.Wait(bg, e.agent, key, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if op.Status == want {
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("status = %s, want %s", op.Status, want)
		}
	}
}

// ephemeral waits for an ephemeral message to user containing want.
func (e *env) ephemeral(t testing.TB, user, want string) fakeslack.Ephemeral {
	t.Helper()
	var got fakeslack.Ephemeral
	e.fake.Wait(t, 10*time.Second, "an ephemeral message to "+user+" saying "+want, func() bool {
		for _, m := range e.fake.Ephemerals(user) {
			if strings.Contains(m.Text, want) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

func (e *env) get(t testing.TB, key string) *approval.Operation {
	t.Helper()
	op, err := e.svc.Get(bg, e.agent, key)
	if err != nil {
		t.Fatal(err)
	}
	return op
}
