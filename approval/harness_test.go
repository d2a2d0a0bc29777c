package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// clock runs at real speed from a fixed start, and Add jumps it forward,
// so timers fire while tests can still skip past windows.
type clock struct {
	mu    sync.Mutex
	t     time.Time
	start time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), start: time.Now()}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.Add(time.Since(c.start))
}

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// effect is a test action: it normalizes {"n": int, "note": string} and
// counts executions, so tests can assert "exactly once".
type effect struct {
	runs  atomic.Int32
	fail  atomic.Pointer[approval.ExecError]
	mu    sync.Mutex
	seen  []json.RawMessage
	block chan struct{} // when set, Execute waits on it
	// wire, when set, is waited on after the claim's re-check passed: the
	// write is on its way (a pause there cannot be fenced).
	wire chan struct{}
	// receipts minted in Execute; prepareSigned counts prepares that found
	// a countersigner (there must be none outside an execution).
	receipts      []string
	prepareSigned atomic.Int32
	// recheck, when set, is what the approval page's re-read of the
	// effect's state does (a state-bound action's Recheck).
	recheck func(context.Context) error
}

// Recheck makes the test effect state-bound for the approval page.
func (e *effect) Recheck(ctx context.Context, _ *approval.Operation) error {
	if e.recheck == nil {
		return nil
	}
	return e.recheck(ctx)
}

func (e *effect) Name() string { return "test.effect" }

func (e *effect) Prepare(ctx context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	if approval.CountersignerFrom(ctx) != nil {
		e.prepareSigned.Add(1)
	}
	var in struct {
		N    int    `json:"n"`
		Note string `json:"note"`
	}
	if err := json.Unmarshal(req.Input, &in); err != nil {
		return nil, approval.FieldErrors{{Field: "input", Reason: "not an object"}}.Err()
	}
	if in.N < 0 {
		return nil, approval.PolicyDenied("negative", "n must not be negative")
	}
	var warnings []string
	if in.Note == "irreversible" {
		warnings = []string{"irreversible"}
	}
	return &approval.Prepared{Input: in, Attrs: map[string]string{"n": itoa(in.N), "note": in.Note}, Preview: approval.Preview{Title: "Test effect", Summary: in.Note, Warnings: warnings,
		Fields: []approval.Field{{Name: "n", Label: "N", Value: json.Number(itoa(in.N)).String()}}}}, nil
}

// Irreversible: a test effect whose note is "irreversible" is; an
// allowance covers only such operations when it pins the note to that.
func (e *effect) Irreversible(pinned map[string][]string) (bool, string) {
	notes, ok := pinned["note"]
	switch irr := slices.Contains(notes, "irreversible"); {
	case ok && !irr:
		return false, ""
	case ok && len(notes) == 1:
		return true, ""
	}
	return false, "irreversible test effects"
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func (e *effect) Execute(ctx context.Context, op *approval.Operation) (json.RawMessage, error) {
	if e.block != nil {
		<-e.block
	}
	// Like every real action: re-check the claim right before the effect.
	if err := approval.CheckClaim(ctx); err != nil {
		return nil, approval.ClaimLostExecError(err)
	}
	if e.wire != nil {
		<-e.wire
	}
	e.runs.Add(1)
	tok, err := approval.CountersignerFrom(ctx).Mint(approval.ReceiptRequest{Audience: "test"})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.seen = append(e.seen, op.Input)
	if tok != "" {
		e.receipts = append(e.receipts, tok)
	}
	e.mu.Unlock()
	if f := e.fail.Load(); f != nil {
		return nil, f
	}
	return json.RawMessage(`{"ok":true}`), nil
}

// inbox is a notifier that keeps what it was asked to deliver, the way a
// person's inbox would; failN makes the next N deliveries fail.
type inbox struct {
	mu      sync.Mutex
	notices []approval.Notice
	failN   atomic.Int32
	got     chan struct{}
}

func newInbox() *inbox { return &inbox{got: make(chan struct{}, 1000)} }

func (b *inbox) Notify(_ context.Context, n approval.Notice) (map[string]string, error) {
	if b.failN.Add(-1) >= 0 {
		return nil, errors.New("inbox unavailable")
	}
	b.mu.Lock()
	b.notices = append(b.notices, n)
	count := len(b.notices)
	b.mu.Unlock()
	b.got <- struct{}{}
	return map[string]string{"n": itoa(count)}, nil
}

// link waits for the notice to approver and returns its link token.
func (b *inbox) link(t *testing.T, approver string) string {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		b.mu.Lock()
		for _, n := range b.notices {
			if n.Approver != nil && n.Approver.ID == approver && n.Link != "" {
				b.mu.Unlock()
				return tokenOf(n.Link)
			}
		}
		b.mu.Unlock()
		select {
		case <-b.got:
		case <-deadline:
			t.Fatalf("no notice for %s", approver)
		}
	}
}

func (b *inbox) count() int { b.mu.Lock(); defer b.mu.Unlock(); return len(b.notices) }

func tokenOf(link string) string {
	const marker = "/a/"
	for i := 0; i+len(marker) <= len(link); i++ {
		if link[i:i+len(marker)] == marker {
			return link[i+len(marker):]
		}
	}
	return link
}

type harness struct {
	svc    *approval.Service
	store  *store.Redis
	paused *pausable // the service's store; pause its executor with paused.paused
	clock  *clock
	effect *effect
	inbox  *inbox
	agent  *approval.Principal
	writes atomic.Bool
	events chan approval.Event
}

type opts struct {
	required   int
	approvers  []string
	forbidSelf bool
	// quotas of the agent; unset, they are large enough for benchmarks.
	quotas   *approval.Quotas
	receipts approval.ReceiptSigner
	// route adjusts the test route (reminders, escalation, edits).
	route func(*approval.RouteRule)
	// share is another replica whose clock and inbox (the people) this
	// one shares.
	share *harness
	// callbacks posts the agent's status changes (status webhooks).
	callbacks approval.Callbacks
	// execLease is the execution lease (default approval's).
	execLease time.Duration
	// policy adjusts the whole policy (after route).
	policy func(*approval.Policy)
}

// pausable is the store with the executor's re-checks and lease renewals
// held while paused is set: the executor's process as if stopped (SIGSTOP),
// while operators (who call Settle) go on.
type pausable struct {
	*store.Redis
	paused atomic.Bool
}

func (p *pausable) Fence(ctx context.Context, ref approval.Ref, token string, ttl time.Duration) (approval.FenceResult, approval.Status, error) {
	for p.paused.Load() {
		time.Sleep(5 * time.Millisecond)
	}
	return p.Redis.Fence(ctx, ref, token, ttl)
}

func newHarness(t testing.TB, o opts) *harness {
	t.Helper()
	srv := redistest.Start(t)
	return newHarnessOn(t, srv.Client(t), o)
}

func newHarnessOn(t testing.TB, rdb redis.UniversalClient, o opts) *harness {
	t.Helper()
	if o.required == 0 {
		o.required = 1
	}
	if o.approvers == nil {
		o.approvers = []string{"grace"}
	}
	h := &harness{
		store: store.New(rdb, nil), clock: newClock(),
		effect: &effect{}, inbox: newInbox(), events: make(chan approval.Event, 1000),
		agent: &approval.Principal{ID: "agent", Scopes: []string{"test.effect"}, OnBehalfOf: "sam",
			Quotas: approval.Quotas{MaxDrafts: 1e6, MaxPending: 1e6, MaxStoredBytes: 1 << 40, RequestsPerMinute: 1e7, SendsPerMinute: 1e7}},
	}
	if o.quotas != nil {
		h.agent.Quotas = *o.quotas
	}
	if o.share != nil {
		h.clock, h.inbox = o.share.clock, o.share.inbox
	}
	h.store.Block = 100 * time.Millisecond
	h.store.ClaimIdle = 500 * time.Millisecond
	h.writes.Store(true)
	t.Cleanup(func() { _ = h.store.Close() })
	policy := &approval.Policy{
		Principals: []*approval.Principal{h.agent},
		Approvers: []*approval.Approver{
			{ID: "grace", Name: "Grace Park", Email: "grace@example.com"},
			{ID: "ada", Name: "Ada Lovelace", Email: "ada@example.com"},
			{ID: "sam", Name: "Sam Lee", Email: "sam@example.com"},
		},
		Routes: []approval.RouteRule{{Name: "test", Match: approval.Match{Action: "test.effect"},
			ApproverIDs: o.approvers, Required: o.required, Notify: []string{"console"}, ForbidSelfApproval: o.forbidSelf},
			{Name: "allowances", Match: approval.Match{Action: approval.GrantAction},
				ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}}},
	}
	if o.route != nil {
		o.route(&policy.Routes[0])
	}
	if o.policy != nil {
		o.policy(policy)
	}
	links := approval.RandomKeyring()
	if o.share != nil {
		links = o.share.svc.Links() // replicas share their link keys
	}
	h.paused = &pausable{Redis: h.store}
	svc, err := approval.NewService(approval.Config{
		Store: h.paused, ExecutionLease: o.execLease, Policy: policy, Actions: []approval.Action{h.effect},
		Notifiers: map[string]approval.Notifier{"console": h.inbox}, Links: links, Receipts: o.receipts,
		PublicURL: "http://countersign.test", Now: h.clock.Now, Writes: h.writes.Load,
		OnEvent: []func(approval.Event){func(e approval.Event) {
			select {
			case h.events <- e:
			default: // benchmarks emit more than tests read
			}
		}},
		WritesRetry: 50 * time.Millisecond,
		Callbacks:   o.callbacks,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	return h
}

// run starts workers and timers until the test ends.
func (h *harness) run(t *testing.T, workers int) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); h.svc.RunWorkers(ctx, h.store, "w", workers) }()
	go func() { defer wg.Done(); h.svc.RunTimers(ctx, h.store, 20*time.Millisecond) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func (h *harness) prepare(t *testing.T, n int) *approval.Operation {
	t.Helper()
	op, created, err := h.svc.Prepare(context.Background(), h.agent, approval.PrepareCall{
		Action: "test.effect", Input: json.RawMessage(`{"n":` + itoa(n) + `,"note":"hello"}`)})
	if err != nil || !created {
		t.Fatalf("prepare: %v (created %v)", err, created)
	}
	return op
}

func (h *harness) send(t *testing.T, key string) *approval.Operation {
	t.Helper()
	op, err := h.svc.Send(context.Background(), h.agent, key)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return op
}

// waitStatus long-polls until the operation reaches want.
func (h *harness) waitStatus(t *testing.T, key string, want approval.Status) *approval.Operation {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		op, err := h.svc.Wait(context.Background(), h.agent, key, time.Second)
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		if op.Status == want {
			return op
		}
	}
	op, _ := h.svc.Get(context.Background(), h.agent, key)
	t.Fatalf("status = %s, want %s", op.Status, want)
	return nil
}

// The test effect's note is editable.
func (e *effect) Editable(op *approval.Operation) []approval.EditableField {
	var in struct {
		Note string `json:"note"`
	}
	_ = json.Unmarshal(op.Input, &in)
	return []approval.EditableField{{Name: "note", Label: "Note", Value: in.Note}}
}

func (e *effect) EditInput(op *approval.Operation, changes map[string]string) (json.RawMessage, error) {
	var in map[string]any
	_ = json.Unmarshal(op.Input, &in)
	for k, v := range changes {
		if k != "note" {
			return nil, approval.EditError(k)
		}
		in["note"] = v
	}
	return json.Marshal(in)
}
