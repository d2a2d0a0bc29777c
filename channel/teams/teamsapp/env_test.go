package teamsapp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	actemail "github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	notifyemail "github.com/countersign/countersign/channel/email"
	"github.com/countersign/countersign/channel/email/mailer"
	notifyteams "github.com/countersign/countersign/channel/teams"
	"github.com/countersign/countersign/channel/teams/teamsapp"
	"github.com/countersign/countersign/internal/httpbody"
	"github.com/countersign/countersign/internal/testing/faketeams"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/store"
	"github.com/gofiber/fiber/v2"
)

// The service under test: approval.Service on Redis with the real Teams
// channel and interaction handler talking to faketeams, and the real
// email channel and email.send action talking to an in-process SMTP
// server.

var bg = context.Background()

// People of the fake tenant.
var (
	grace    = faketeams.User{ID: "29:1GraceTeamsId", AADObjectID: "6b1a2f3e-0000-4000-8000-00000000aaaa", Name: "Grace Park"}
	ada      = faketeams.User{ID: "29:1AdaTeamsId", AADObjectID: "6b1a2f3e-0000-4000-8000-00000000bbbb", Name: "Ada Lovelace"}
	sam      = faketeams.User{ID: "29:1SamTeamsId", AADObjectID: "6b1a2f3e-0000-4000-8000-00000000cccc", Name: "Sam Lee"}
	eve      = faketeams.User{ID: "29:1EveTeamsId", AADObjectID: "6b1a2f3e-0000-4000-8000-00000000dddd", Name: "Eve Moss"}
	stranger = faketeams.User{ID: "29:1Stranger", AADObjectID: "6b1a2f3e-0000-4000-8000-00000000eeee", Name: "Mallory"}
)

const target = "http://countersign.test/teams/messages"

type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.off += d; c.mu.Unlock() }

type opts struct {
	required int
	notify   []string
	// stepUp puts the route under step_up: passkey (no passkeys are set up).
	stepUp bool
}

type env struct {
	svc     *approval.Service
	store   *store.Redis
	fake    *faketeams.Server
	smtp    *smtptest.Server
	app     *fiber.App
	handler *teamsapp.Handler
	agent   *approval.Principal
	clock   *clock
}

func newEnv(t testing.TB, o opts) *env {
	t.Helper()
	if o.required == 0 {
		o.required = 1
	}
	if o.notify == nil {
		o.notify = []string{"teams", "email"}
	}
	rdb := redistest.Start(t).Client(t)
	e := &env{store: store.New(rdb, nil), fake: faketeams.New(t), smtp: smtptest.Start(t, smtptest.Options{}), clock: &clock{}}
	e.store.Block = 100 * time.Millisecond
	e.store.ClaimIdle = 500 * time.Millisecond
	t.Cleanup(func() { _ = e.store.Close() })

	e.agent = &approval.Principal{ID: "support-agent", Scopes: []string{"email.send"}, OnBehalfOf: "sam"}
	policy := &approval.Policy{
		Principals: []*approval.Principal{e.agent},
		Approvers: []*approval.Approver{
			{ID: "grace", Name: "Grace Park", Email: "grace@example.com", TeamsUserID: grace.ID},
			// ada is known by her Entra object id, written in upper case.
			{ID: "ada", Name: "Ada Lovelace", Email: "ada@example.com", TeamsUserID: strings.ToUpper(ada.AADObjectID)},
			{ID: "sam", Name: "Sam Lee", Email: "sam@example.com", TeamsUserID: sam.ID},
			{ID: "eve", Name: "Eve Moss", Email: "eve@example.com", TeamsUserID: eve.ID},
		},
		Routes: []approval.RouteRule{{Name: "email", Match: approval.Match{Action: "email.send"},
			ApproverIDs: []string{"grace", "ada", "sam"}, Required: o.required, Notify: o.notify, ForbidSelfApproval: true,
			StepUp: map[bool]string{true: approval.StepUpPasskey}[o.stepUp]}},
	}
	mcfg, err := mailer.ParseURL(e.smtp.URL())
	if err != nil {
		t.Fatal(err)
	}
	sender := mailer.NewSMTP(mcfg)
	send, err := actemail.New(sender, mcfg.From, actemail.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	mail, err := notifyemail.New(sender, mcfg.From)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := notifyteams.NewConnector(notifyteams.ConnectorConfig{ServiceURL: e.fake.ServiceURL(), LoginURL: e.fake.LoginURL(),
		AppID: e.fake.AppID, Password: e.fake.Password, TenantID: e.fake.TenantID})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := approval.NewService(approval.Config{
		Store: e.store, Policy: policy, Links: approval.RandomKeyring(), PublicURL: "http://countersign.test",
		Actions:   []approval.Action{send},
		Notifiers: map[string]approval.Notifier{"teams": notifyteams.New(notifyteams.Config{Connector: conn}), "email": mail},
		Now:       e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	verifier, err := teamsapp.NewVerifier(teamsapp.VerifierConfig{OpenIDURL: e.fake.OpenIDURL(), AppID: e.fake.AppID, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.handler, err = teamsapp.New(teamsapp.Config{Service: svc, Verifier: verifier, Replays: e.store, TenantID: e.fake.TenantID})
	if err != nil {
		t.Fatal(err)
	}
	e.app = fiber.New(fiber.Config{DisableStartupMessage: true, StreamRequestBody: true})    // as countersign serve does
	e.app.Use(func(c *fiber.Ctx) error { defer httpbody.Finish(c, 1<<20); return c.Next() }) // as web's gate does
	e.app.Post("/teams/messages", e.handler.Handle)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); svc.RunWorkers(ctx, e.store, "w", 2) }()
	go func() { defer wg.Done(); svc.RunTimers(ctx, e.store, 20*time.Millisecond) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return e
}

// prepareSend prepares an email.send and sends it for approval.
func (e *env) prepareSend(t testing.TB, subject, text string) *approval.Operation {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"to": []string{"client@client.example"}, "subject": subject, "text": text})
	op, _, err := e.svc.Prepare(bg, e.agent, approval.PrepareCall{Action: "email.send", Input: in})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if op, err = e.svc.Send(bg, e.agent, op.Key); err != nil {
		t.Fatalf("send: %v", err)
	}
	return op
}

// cards waits for n approval cards of op, and for their deliveries to be
// recorded (as a human's click would, seconds later).
func (e *env) cards(t testing.TB, key string, n int) []faketeams.Activity {
	t.Helper()
	var found []faketeams.Activity
	e.fake.Wait(t, 15*time.Second, "the approval cards of "+key, func() bool {
		found = nil
		for _, a := range e.fake.Activities() {
			if d := faketeams.FindAction(&a.Card, "reject"); d != nil && d.Data.Operation == key {
				found = append(found, a)
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
			if d.Channel == "teams" {
				recorded++
			}
		}
		if recorded >= n {
			return found
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Teams deliveries of %s recorded", recorded, n, key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cardOf returns the card posted to member (1:1) among cards.
func cardOf(t testing.TB, cards []faketeams.Activity, member string) faketeams.Activity {
	t.Helper()
	for _, c := range cards {
		if c.Member == member {
			return c
		}
	}
	t.Fatalf("no card to %s", member)
	return faketeams.Activity{}
}

// do sends a request to the handler and decodes the invoke response.
func (e *env) do(t testing.TB, req *http.Request) faketeams.Response {
	t.Helper()
	resp, err := e.app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return faketeams.ReadResponse(resp)
}

// click presses verb on card as u, with a valid token, and expects a card back.
func (e *env) click(t testing.TB, card faketeams.Activity, verb string, u faketeams.User, reason string) faketeams.Response {
	t.Helper()
	r := e.do(t, e.fake.Invoke(target, e.fake.ClickOn(card, verb, u, reason), faketeams.Sign{}))
	if r.HTTPStatus != 200 || r.StatusCode != 200 || r.Card == nil {
		t.Fatalf("click %s as %s: HTTP %d, %s", verb, u.Name, r.HTTPStatus, r.Raw)
	}
	return r
}

// waitCard waits until the card satisfies cond.
func (e *env) waitCard(t testing.TB, a faketeams.Activity, what string, cond func(faketeams.Activity) bool) faketeams.Activity {
	t.Helper()
	var cur faketeams.Activity
	e.fake.Wait(t, 15*time.Second, what, func() bool {
		cur, _ = e.fake.Activity(a.Conversation, a.ID)
		return cond(cur)
	})
	return cur
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

func (e *env) get(t testing.TB, key string) *approval.Operation {
	t.Helper()
	op, err := e.svc.Get(bg, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// sentTo counts the messages the SMTP server accepted for addr.
func (e *env) sentTo(addr string) int {
	n := 0
	for _, m := range e.smtp.Messages() {
		for _, r := range m.To {
			if r == addr && m.Outcome == smtptest.Accepted {
				n++
			}
		}
	}
	return n
}

var linkRE = regexp.MustCompile(`http://countersign\.test/a/[A-Za-z0-9_.-]+`)

// emailLink waits for the approval email to addr and returns its link token.
func (e *env) emailLink(t testing.TB, addr string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range e.smtp.Messages() {
			if len(m.To) == 1 && m.To[0] == addr {
				p, err := m.Parse()
				if err != nil {
					t.Fatal(err)
				}
				if l := linkRE.FindString(p.Text); l != "" {
					return l[strings.LastIndex(l, "/a/")+3:]
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no approval email to %s", addr)
	return ""
}

func hasButtons(a faketeams.Activity) bool { return len(faketeams.Verbs(&a.Card)) > 0 }
