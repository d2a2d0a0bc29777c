package approval

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Service is countersign's use cases: agents prepare, send and follow
// operations; humans decide; workers notify and execute. Adapters (REST,
// MCP, pages, Slack) call it; it calls its interfaces.
type Service struct {
	store          Store
	policy         *Policy
	actions        map[string]Action
	notifiers      map[string]Notifier
	links          *Keyring
	receipts       ReceiptSigner
	publicURL      string
	now            func() time.Time
	writes         func() bool
	onEvent        []func(Event)
	log            *slog.Logger
	draftTTL       time.Duration
	retention      time.Duration
	draftRetention time.Duration
	// WritesRetry is how often an approved operation is looked at again
	// while writes are off.
	writesRetry time.Duration
	// execLease is how long an execution's claim holds unrenewed (fence.go).
	execLease time.Duration
	// holder names this process in leases and claims.
	holder  string
	closing chan struct{}
	// passkeys and passkeyStore serve step-up routes (stepup.go); nil: none.
	passkeys     Passkeys
	passkeyStore PasskeyStore
	// callbacks posts status changes to principals' webhooks (callback.go);
	// nil: none.
	callbacks     Callbacks
	callbackStore CallbackStore
	onCallback    func(outcome string)
	// waits counts the long-polls each principal holds open in this
	// process (Wait), at most MaxWaits each.
	waitMu sync.Mutex
	waits  map[string]int
}

// Config builds a Service. Store, Policy and Links are required.
type Config struct {
	Store     Store
	Policy    *Policy
	Actions   []Action
	Notifiers map[string]Notifier
	Links     *Keyring
	// Receipts signs countersignature receipts (SPEC §9); nil: none.
	Receipts ReceiptSigner
	// PublicURL is the base of approval links, never taken from a request.
	PublicURL string
	Now       func() time.Time
	// Writes reports whether the kill switch lets approved operations run.
	Writes func() bool
	// OnEvent receives every audit event after it is stored (audit log,
	// metrics). It must not block.
	OnEvent   []func(Event)
	Logger    *slog.Logger
	DraftTTL  time.Duration
	Retention time.Duration
	// DraftRetention is how long a draft that ended unsent is kept
	// (default 1 h).
	DraftRetention time.Duration
	WritesRetry    time.Duration
	// ExecutionLease is how long an execution's claim holds on the store's
	// clock unless its executor renews it (default DefaultExecutionLease).
	ExecutionLease time.Duration
	// Passkeys verifies step-up assertions (SPEC §11); with it, a Store
	// that is a PasskeyStore keeps the passkeys. nil: step_up routes
	// refuse every decision.
	Passkeys Passkeys
	// Callbacks delivers status changes to the principals' webhooks, with
	// a Store that is a CallbackStore; nil: none. OnCallback hears the
	// outcome of every attempt ("delivered", "failed"), for metrics.
	Callbacks  Callbacks
	OnCallback func(outcome string)
}

// NewService checks cfg and builds the service.
func NewService(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Policy == nil || cfg.Links == nil {
		return nil, errors.New("approval: store, policy and links are required")
	}
	s := &Service{
		store: cfg.Store, policy: cfg.Policy, actions: map[string]Action{}, notifiers: cfg.Notifiers,
		links: cfg.Links, receipts: cfg.Receipts, publicURL: strings.TrimRight(cfg.PublicURL, "/"), now: cfg.Now, writes: cfg.Writes,
		onEvent: cfg.OnEvent, log: cfg.Logger, draftTTL: cfg.DraftTTL, retention: cfg.Retention,
		draftRetention: cfg.DraftRetention, writesRetry: cfg.WritesRetry, execLease: cfg.ExecutionLease, holder: RandomToken(10),
		closing: make(chan struct{}), passkeys: cfg.Passkeys, callbacks: cfg.Callbacks, onCallback: cfg.OnCallback,
	}
	s.passkeyStore, _ = cfg.Store.(PasskeyStore)
	s.callbackStore, _ = cfg.Store.(CallbackStore)
	if s.callbacks != nil && s.callbackStore == nil {
		return nil, errors.New("approval: status webhooks need a store that keeps their cursor")
	}
	for _, a := range cfg.Actions {
		s.actions[a.Name()] = a
	}
	s.actions[GrantAction] = grantAction{s}
	// Operations of Previewer actions are kept without their preview (preview.go).
	if ps, ok := cfg.Store.(PreviewStore); ok {
		ps.SetPreviews(&previews{actions: s.actions})
	}
	if s.notifiers == nil {
		s.notifiers = map[string]Notifier{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.writes == nil {
		s.writes = func() bool { return true }
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.draftTTL == 0 {
		s.draftTTL = DefaultDraftTTL
	}
	if s.draftTTL < MinDraftTTL || s.draftTTL > MaxDraftTTL {
		return nil, errors.New("approval: draft_ttl must be between 1 and 60 minutes")
	}
	if s.retention == 0 {
		s.retention = DefaultRetention
	}
	if s.draftRetention == 0 {
		s.draftRetention = DefaultDraftRetention
	}
	if s.execLease <= 0 {
		s.execLease = DefaultExecutionLease
	}
	if s.writesRetry == 0 {
		s.writesRetry = 5 * time.Second
	}
	return s, nil
}

// Policy returns the service's policy (read-only).
func (s *Service) Policy() *Policy { return s.policy }

// Links returns the keyring (the web layer derives CSRF tokens from it).
func (s *Service) Links() *Keyring { return s.links }

// Now is the service clock.
func (s *Service) Now() time.Time { return s.now() }

// Close ends long-polls so that a graceful shutdown is not held up.
func (s *Service) Close() {
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
}

// Authenticate finds the principal of an API key. Returns unauthenticated.
func (s *Service) Authenticate(apiKey string) (*Principal, error) {
	if apiKey == "" {
		return nil, Errorf(CodeUnauthenticated, "missing API key: send Authorization: Bearer <api key>")
	}
	p := s.policy.PrincipalByKeyHash(strings.TrimPrefix(SHA256Hex([]byte(apiKey)), "sha256:"))
	if p == nil {
		return nil, Errorf(CodeUnauthenticated, "unknown API key")
	}
	return p, nil
}

// PrepareRequest is an agent's request to prepare an operation.
type PrepareCall struct {
	Action         string          `json:"action"`
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

var idemPattern = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)

// Prepare validates, normalizes, applies policy and stores a draft. It
// reaches no human and changes nothing remote. created is false when the
// idempotency key returned an existing operation.
//
// Returns unknown_action, invalid_input, insufficient_scope,
// policy_denied, no_route, idempotency_key_reused or unavailable; nothing
// is stored on any error.
func (s *Service) Prepare(ctx context.Context, p *Principal, req PrepareCall) (op *Operation, created bool, err error) {
	return s.prepare(ctx, p, req, "")
}

// prepare counts the request against the principal's rate in the script
// that stores the draft; a request refused before that point is counted on
// its own, and so is one whose action reads remote state first, before the
// read: no request escapes the rate limit.
func (s *Service) prepare(ctx context.Context, p *Principal, req PrepareCall, undoes string) (*Operation, bool, error) {
	quotas := p.Limits()
	if _, remote := optional[Rechecker](s.actions[req.Action]); remote {
		if err := s.store.Rate(ctx, p.ID, quotas.RequestsPerMinute); err != nil {
			return nil, false, err
		}
		quotas.RequestsPerMinute = 0
	}
	op, ev, err := s.draft(ctx, p, req, undoes)
	if err != nil {
		if quotas.RequestsPerMinute > 0 {
			if rerr := s.store.Rate(ctx, p.ID, quotas.RequestsPerMinute); rerr != nil {
				return nil, false, rerr
			}
		}
		return nil, false, err
	}
	// Guarantee 10: what is kept is bounded by what was asked.
	request := int64(len(req.Input) + len(req.Action) + len(req.IdempotencyKey) + 64)
	err = s.store.Create(ctx, op, CreateTransition{
		Step: s.step(ev), TTL: s.draftTTL + s.draftRetention, Quotas: quotas, MaxBytes: 4*request + 64<<10,
	})
	var bound *Bound
	switch {
	case errors.As(err, &bound):
		if bound.PayloadHash != op.PayloadHash {
			return nil, false, Errorf(CodeIdempotencyKeyReused, "idempotency key %q was used for a different request", req.IdempotencyKey).
				WithDetails(map[string]any{"operation_key": bound.Operation})
		}
		existing, err := s.store.Get(ctx, Ref{Principal: p.ID, Key: bound.Operation})
		if err != nil {
			return nil, false, err
		}
		return existing, false, nil
	case err != nil:
		return nil, false, err
	}
	s.emit(ev)
	return op, true, nil
}

// draft validates and normalizes a request into a draft and its event,
// without storing anything.
func (s *Service) draft(ctx context.Context, p *Principal, req PrepareCall, undoes string) (*Operation, Event, error) {
	action, ok := s.actions[req.Action]
	if !ok {
		return nil, Event{}, Errorf(CodeUnknownAction, "no such action %q; available: %s", req.Action, strings.Join(s.ActionNames(), ", ")).
			WithDetails(map[string]any{"available": s.ActionNames()})
	}
	if req.IdempotencyKey != "" && !idemPattern.MatchString(req.IdempotencyKey) {
		return nil, Event{}, FieldErrors{{Field: "idempotency_key", Reason: "must be 1-128 printable ASCII characters without spaces"}}.Err()
	}
	// An undo is drafted from an operation the principal owns, with input
	// from that action's Undoer rather than the agent: the scope that let
	// the principal prepare the original covers its compensation.
	if undoes == "" && req.Action != GrantAction && !p.AllowsAction(req.Action) {
		return nil, Event{}, Errorf(CodeInsufficientScope, "principal %s may not prepare %s", p.ID, req.Action)
	}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		return nil, Event{}, FieldErrors{{Field: "input", Reason: "required"}}.Err()
	}
	// Guarantee 13, once for every action: no value of the input has two
	// names, and no number changes when canonicalized. Deep input is left
	// to the action, which refuses it in its own words (and is refused
	// here if it does not).
	depthErr := CheckJSONDepth(req.Input, "")
	if depthErr == nil {
		if err := CheckJSONMembers(req.Input, ""); err != nil {
			return nil, Event{}, err
		}
	}
	prep, err := action.Prepare(ctx, PrepareRequest{Principal: p, Input: req.Input})
	if err != nil {
		return nil, Event{}, err
	}
	if depthErr != nil {
		return nil, Event{}, depthErr
	}
	if err := checkEscapeGrowth(prep.Preview, len(req.Input)); err != nil {
		return nil, Event{}, err
	}
	scope := prep.Scope
	if scope == "" {
		scope = req.Action
	}
	if undoes == "" && !p.Allows(scope) {
		return nil, Event{}, Errorf(CodeInsufficientScope, "principal %s may not prepare %s", p.ID, scope).
			WithDetails(map[string]any{"scope": scope})
	}
	input, err := Canonical(prep.Input)
	if err != nil {
		return nil, Event{}, err
	}
	hash, err := PayloadHash(req.Action, input, p.ID)
	if err != nil {
		return nil, Event{}, err
	}
	attrs := map[string]string{}
	for k, v := range prep.Attrs {
		attrs[k] = v
	}
	route, err := s.policy.Resolve(req.Action, p, attrs)
	if err != nil {
		return nil, Event{}, err
	}

	now := s.now().UTC()
	op := &Operation{
		Key: NewOperationKey(), Action: req.Action, Principal: p.ID, OnBehalfOf: p.OnBehalfOf,
		Input: input, PayloadHash: hash, Preview: prep.Preview, State: prep.State, Route: route,
		IdempotencyKey: req.IdempotencyKey, Undoes: undoes, CreatedAt: now,
		Status: StatusDraft, ExpiresAt: now.Add(s.draftTTL), UpdatedAt: now, Version: 1, Attrs: attrs,
	}
	if op.Preview.Fields == nil {
		op.Preview.Fields = []Field{}
	}
	ev := s.event(op, "prepared", "principal:"+p.ID, "")
	ev.Details = map[string]any{"route": route.Name}
	return op, ev, nil
}

// Refused counts a request that an adapter refused before it reached the
// service (a body that is not JSON): no request escapes the rate limit.
// It returns rate_limited (or unavailable) instead of err when it applies.
func (s *Service) Refused(ctx context.Context, p *Principal, err error) error {
	if rerr := s.store.Rate(ctx, p.ID, p.Limits().RequestsPerMinute); rerr != nil {
		return rerr
	}
	return err
}

// step starts a transition that records ev.
func (s *Service) step(ev Event) Step {
	return Step{Tx: RandomToken(10), Now: ev.Time, Event: ev, Retention: s.retention, DraftRetention: s.draftRetention}
}

// AllowsAction reports whether any scope of p covers action (with or
// without a target), so requests for actions the principal can never use
// are refused before the action does any work.
func (p *Principal) AllowsAction(action string) bool {
	for _, sc := range p.Scopes {
		if sc == "*" || sc == action || strings.HasPrefix(sc, action+":") {
			return true
		}
	}
	return false
}

// ActionNames lists the configured actions.
func (s *Service) ActionNames() []string {
	var names []string
	for n := range s.actions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Get returns the principal's operation as of now, counted against its
// request rate; with a nil principal (operators), anyone's, uncounted.
// Returns not_found for unknown keys and for other principals'
// operations, and rate_limited.
func (s *Service) Get(ctx context.Context, p *Principal, key string) (*Operation, error) {
	if !ValidOperationKey(key) {
		return nil, badKey(key)
	}
	if p == nil {
		return s.load(ctx, Ref{Key: key})
	}
	op, err := s.store.Read(ctx, Ref{Principal: p.ID, Key: key}, p.Limits().RequestsPerMinute)
	if err != nil {
		return nil, err
	}
	if op.Principal != p.ID {
		return nil, notFound(key)
	}
	return s.current(ctx, op)
}

// own reads the principal's operation without counting it (a re-read
// after a transition the principal made).
func (s *Service) own(ctx context.Context, p *Principal, key string) (*Operation, error) {
	if !ValidOperationKey(key) {
		return nil, badKey(key)
	}
	op, err := s.load(ctx, Ref{Principal: p.ID, Key: key})
	if err == nil && op.Principal != p.ID {
		return nil, notFound(key)
	}
	return op, err
}

func badKey(key string) error {
	return Errorf(CodeNotFound, "no operation %q: keys look like op_ followed by 26 characters", key)
}

func notFound(key string) error {
	return Errorf(CodeNotFound, "no operation %s", key)
}

// load reads an operation and records its expiry if the window passed. A
// Ref without a principal is located by its key.
func (s *Service) load(ctx context.Context, ref Ref) (*Operation, error) {
	if !ValidOperationKey(ref.Key) {
		return nil, badKey(ref.Key)
	}
	op, err := s.store.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.current(ctx, op)
}

// current records the expiry of an operation read after its window passed.
func (s *Service) current(ctx context.Context, op *Operation) (*Operation, error) {
	if op.Status.Expirable() && op.EffectiveStatus(s.now()) == StatusExpired {
		return s.expire(ctx, op)
	}
	return op, nil
}

func (s *Service) expire(ctx context.Context, op *Operation) (*Operation, error) {
	ev := s.event(op, "expired", "system", "")
	ev.Status = StatusExpired
	if _, moved, err := s.store.Expire(ctx, op.Ref(), s.step(ev)); err != nil {
		return nil, err
	} else if moved {
		s.emit(ev)
	}
	return s.store.Get(ctx, op.Ref())
}

// MaxWaits is how many long-polls one principal may hold open at once in
// one process. Each holds a connection and a goroutine for up to 30 s, so
// without a bound the request rate alone (600 a minute by default) would
// let one agent keep hundreds open; past it, a wait is refused with
// rate_limited at once, before anything is read.
const MaxWaits = 32

// Waiting reports how many long-polls principal holds open in this process.
func (s *Service) Waiting(principal string) int {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	return s.waits[principal]
}

// holdWait takes one of the principal's long-poll places, or says none is
// free; release gives it back.
func (s *Service) holdWait(principal string) (release func(), ok bool) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if s.waits[principal] >= MaxWaits {
		return nil, false
	}
	if s.waits == nil {
		s.waits = map[string]int{}
	}
	s.waits[principal]++
	return func() {
		s.waitMu.Lock()
		defer s.waitMu.Unlock()
		if s.waits[principal]--; s.waits[principal] <= 0 {
			delete(s.waits, principal)
		}
	}, true
}

// Wait returns the operation once it changes, or after d, whichever comes
// first. An operation already terminal is returned at once. It counts as
// one request. Returns rate_limited when the principal holds MaxWaits
// long-polls open already, and the codes of Get.
func (s *Service) Wait(ctx context.Context, p *Principal, key string, d time.Duration) (*Operation, error) {
	if d <= 0 {
		return s.Get(ctx, p, key)
	}
	if !ValidOperationKey(key) {
		return nil, badKey(key)
	}
	holder := ""
	if p != nil {
		holder = p.ID
	}
	release, ok := s.holdWait(holder)
	if !ok {
		return nil, Errorf(CodeRateLimited, "%d long-polls (wait) are open already; wait for one of them to return, "+
			"or read the status without waiting", MaxWaits).WithDetails(map[string]any{"retry_after_seconds": 1})
	}
	defer release()
	ch, cancel, err := s.store.Changes(ctx, key)
	if err != nil {
		return nil, err
	}
	defer cancel()
	// Until it changes, where it stands is all a long-poll needs of it.
	sd, full, err := s.readStanding(ctx, p, key)
	if err != nil {
		return nil, err
	}
	if sd.Status.Terminal() || (sd.Status.Expirable() && !s.now().Before(sd.ExpiresAt)) {
		op, err := full()
		if err != nil {
			return nil, err
		}
		return s.current(ctx, op) // records an expiry that happened
	}
	start := sd.Version
	timer := time.NewTimer(d)
	defer timer.Stop()
	// The window may end while we wait; wake then to report expired.
	var expiry <-chan time.Time
	if sd.Status.Expirable() {
		if until := sd.ExpiresAt.Sub(s.now()); until < d {
			t := time.NewTimer(until + 10*time.Millisecond)
			defer t.Stop()
			expiry = t.C
		}
	}
	for {
		select {
		case <-ch:
			cur, err := s.own(ctx, p, key)
			if err != nil || cur.Version != start {
				return cur, err
			}
		case <-expiry:
			return s.own(ctx, p, key)
		case <-timer.C:
			return s.own(ctx, p, key)
		case <-ctx.Done():
			return full()
		case <-s.closing:
			return s.own(context.WithoutCancel(ctx), p, key)
		}
	}
}

// readStanding is Get for a long-poll: where the principal's operation
// stands, and the whole of it from the same read when asked.
func (s *Service) readStanding(ctx context.Context, p *Principal, key string) (Standing, func() (*Operation, error), error) {
	ss, ok := s.store.(StandingStore)
	if !ok {
		op, err := s.Get(ctx, p, key)
		if err != nil {
			return Standing{}, nil, err
		}
		return Standing{Principal: op.Principal, Status: op.Status, Version: op.Version, ExpiresAt: op.ExpiresAt},
			func() (*Operation, error) { return op, nil }, nil
	}
	sd, full, err := ss.ReadStanding(ctx, Ref{Principal: p.ID, Key: key}, p.Limits().RequestsPerMinute)
	if err != nil {
		return Standing{}, nil, err
	}
	if sd.Principal != p.ID {
		return Standing{}, nil, notFound(key)
	}
	return sd, full, nil
}

// MaxListInputBytes bounds the inputs one List returns (guarantee 10):
// each listed operation carries its input and a preview of about its
// size, so without it a request of a few bytes answered with 200
// operations of 200 KB each, tens of megabytes (their stored, compressed
// copies being a few KB). The newest operation is always listed.
const MaxListInputBytes = 1 << 20

// List returns the principal's operations, newest first, optionally only
// those in status: at most 200, and no more once their inputs reach
// MaxListInputBytes.
func (s *Service) List(ctx context.Context, p *Principal, status Status) ([]*Operation, error) {
	if status != "" && !status.Valid() {
		return nil, FieldErrors{{Field: "status", Reason: "unknown status " + string(status)}}.Err()
	}
	if err := s.store.Rate(ctx, p.ID, p.Limits().RequestsPerMinute); err != nil {
		return nil, err
	}
	ops, err := s.store.List(ctx, p.ID, 200)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := []*Operation{}
	size := 0
	for _, op := range ops {
		if status != "" && op.EffectiveStatus(now) != status {
			continue
		}
		if size += len(op.Input); size > MaxListInputBytes && len(out) > 0 {
			break
		}
		out = append(out, op)
	}
	return out, nil
}

// Events returns the audit trail of the principal's operation (anyone's
// for a nil principal).
func (s *Service) Events(ctx context.Context, p *Principal, key string) ([]Event, error) {
	op, err := s.Get(ctx, p, key)
	if err != nil {
		return nil, err
	}
	return s.store.Events(ctx, op.Ref())
}

// Send moves a draft to pending_approval and queues its notifications.
// Calling it again changes nothing and returns the current operation.
// Returns writes_disabled while the kill switch is on (nothing consumed),
// invalid_state for an expired, rejected or canceled operation,
// rate_limited (requests or sends per minute) and quota_exceeded
// (max_pending).
func (s *Service) Send(ctx context.Context, p *Principal, key string) (*Operation, error) {
	op, err := s.own(ctx, p, key)
	if err != nil {
		return nil, err
	}
	switch op.Status {
	case StatusDraft:
	case StatusExpired, StatusRejected, StatusCanceled:
		return nil, stateError(op, "send")
	default:
		return op, nil
	}
	if !s.writes() {
		return nil, Errorf(CodeWritesDisabled, "writes are turned off on this service (COUNTERSIGN_WRITES=off); nothing was sent, try again later")
	}
	now := s.now().UTC()
	expires := now.Add(op.Route.ApprovalTTL)
	ev := s.event(op, "sent", "principal:"+p.ID, "")
	ev.Status = StatusPending
	ev.Details = map[string]any{"approvers": op.Route.Approvers, "required": op.Route.Required, "expires_at": expires}
	exp := s.event(op, "expired", "system", "")
	exp.Status = StatusExpired
	var timers []Timer
	for i, d := range op.Route.Remind {
		timers = append(timers, Timer{Reason: "remind:" + strconv.Itoa(i+1), At: now.Add(d)})
	}
	if e := op.Route.Escalate; e != nil {
		timers = append(timers, Timer{Reason: "escalate", At: now.Add(e.After)})
	}
	st := SendTransition{
		Step: s.step(ev), ExpiresAt: expires, Jobs: s.planJobs(op, op.Route.Approvers, true), TTL: op.Route.ApprovalTTL + s.retention,
		Quotas: p.Limits(), ExpireEvent: exp, Timers: timers,
	}
	spend, err := s.allowanceFor(ctx, p, op)
	if err != nil {
		return nil, err
	}
	if spend != nil {
		st.Spend = spend
		by := s.event(op, "approval", "allowance:"+spend.Allowance, "allowance")
		by.Status = StatusPending
		by.Details = map[string]any{"allowance": spend.Allowance, "amount": spend.Amount}
		quorum := s.event(op, "approved", "system", "")
		quorum.Status = StatusApproved
		st.AllowedEvents = []Event{by, quorum}
	}
	before, cur, err := s.store.Send(ctx, op.Ref(), st)
	if err != nil {
		return nil, err
	}
	if before == StatusDraft {
		s.emit(ev)
	}
	if cur == nil {
		cur, err = s.own(ctx, p, key)
	} else {
		cur, err = s.current(ctx, cur)
	}
	if err != nil {
		return nil, err
	}
	if before == StatusDraft && cur.Allowance != "" {
		for _, e := range st.AllowedEvents {
			s.emit(e)
		}
	}
	if before != StatusDraft && cur.Status.Terminal() && cur.Status != StatusSucceeded && cur.Status != StatusFailed {
		return nil, stateError(cur, "send")
	}
	return cur, nil
}

func stateError(op *Operation, verb string) error {
	return Errorf(CodeInvalidState, "cannot %s operation %s: it is %s", verb, op.Key, op.Status).
		WithDetails(map[string]any{"status": op.Status})
}

// planJobs expands the route's notify list into one job per message:
// one per approver for personal channels, and with shared, one per shared
// target (a Slack channel).
func (s *Service) planJobs(op *Operation, approvers []string, shared bool) []Job {
	var jobs []Job
	for _, spec := range op.Route.Notify {
		channel, target, _ := strings.Cut(spec, ":")
		pa, _ := optional[PerApprover](s.notifiers[channel])
		switch {
		case channel == "slack" && target != "dm",
			channel == "teams" && target != "", // a Teams channel; "teams" alone is each approver's chat
			channel == "webhook" && (pa == nil || !pa.PerApprover(target)):
			if shared {
				jobs = append(jobs, Job{ID: spec, Channel: channel, Target: target})
			}
		default:
			for _, a := range approvers {
				ap := s.policy.Approver(a)
				if ap == nil || (channel == "email" && ap.Email == "") || (channel == "slack" && ap.SlackUserID == "") ||
					(channel == "teams" && ap.TeamsUserID == "") {
					continue
				}
				jobs = append(jobs, Job{ID: spec + ":" + a, Channel: channel, Target: target, Approver: a,
					Link: channel == "email" || channel == "console" || channel == "webhook"})
			}
		}
	}
	return jobs
}

// Cancel ends a draft or pending operation of p, or of anyone when p is nil
// (an operator). Canceling a canceled operation returns it unchanged.
// Returns invalid_state otherwise.
func (s *Service) Cancel(ctx context.Context, p *Principal, key string) (*Operation, error) {
	actor := "operator"
	if p != nil {
		actor = "principal:" + p.ID
	}
	return s.cancel(ctx, p, key, actor)
}

// cancel is Cancel recorded in the audit as done by actor.
func (s *Service) cancel(ctx context.Context, p *Principal, key, actor string) (*Operation, error) {
	var op *Operation
	var err error
	if p != nil {
		if err := s.store.Rate(ctx, p.ID, p.Limits().RequestsPerMinute); err != nil {
			return nil, err
		}
		op, err = s.own(ctx, p, key)
	} else {
		op, err = s.load(ctx, Ref{Key: key})
	}
	if err != nil {
		return nil, err
	}
	ev := s.event(op, "canceled", actor, "")
	ev.Status = StatusCanceled
	before, moved, err := s.store.Cancel(ctx, op.Ref(), s.step(ev))
	if err != nil {
		return nil, err
	}
	if !moved && before != StatusCanceled {
		op.Status = before
		return nil, stateError(op, "cancel")
	}
	if moved {
		s.emit(ev)
		if before == StatusDraft && s.hasCallback(op.Principal) {
			// A draft's end wakes no worker by itself; the webhook hears it.
			if err := s.store.Wake(ctx, op.Ref()); err != nil {
				s.log.Warn("waking the status webhook failed", "operation", op.Key, "err", err)
			}
		}
	}
	return s.store.Get(ctx, op.Ref())
}

// event starts an audit event for op.
func (s *Service) event(op *Operation, name, actor, channel string) Event {
	return Event{Time: s.now().UTC(), Operation: op.Key, Event: name, Actor: actor, Channel: channel,
		PayloadHash: op.PayloadHash, Status: op.Status, Action: op.Action, From: op.Status, SentAt: op.SentAt}
}

func (s *Service) emit(ev Event) {
	for _, f := range s.onEvent {
		f(ev)
	}
}
