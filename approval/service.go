package approval

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Service is countersign's use cases: agents prepare, send and follow
// operations; humans decide; workers notify and execute. Adapters (REST,
// MCP, pages, Slack) call it; it calls its interfaces.
type Service struct {
	store     Store
	policy    *Policy
	actions   map[string]Action
	notifiers map[string]Notifier
	links     *Keyring
	publicURL string
	now       func() time.Time
	writes    func() bool
	onEvent   []func(Event)
	log       *slog.Logger
	draftTTL  time.Duration
	retention time.Duration
	// WritesRetry is how often an approved operation is looked at again
	// while writes are off.
	writesRetry time.Duration
	closing     chan struct{}
	attempts    sync.Map // "key|job" → *atomic.Int32
}

// Config builds a Service. Store, Policy and Links are required.
type Config struct {
	Store     Store
	Policy    *Policy
	Actions   []Action
	Notifiers map[string]Notifier
	Links     *Keyring
	// PublicURL is the base of approval links, never taken from a request.
	PublicURL string
	Now       func() time.Time
	// Writes reports whether the kill switch lets approved operations run.
	Writes func() bool
	// OnEvent receives every audit event after it is stored (audit log,
	// metrics). It must not block.
	OnEvent     []func(Event)
	Logger      *slog.Logger
	DraftTTL    time.Duration
	Retention   time.Duration
	WritesRetry time.Duration
}

// NewService checks cfg and builds the service.
func NewService(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Policy == nil || cfg.Links == nil {
		return nil, errors.New("approval: store, policy and links are required")
	}
	s := &Service{
		store: cfg.Store, policy: cfg.Policy, actions: map[string]Action{}, notifiers: cfg.Notifiers,
		links: cfg.Links, publicURL: strings.TrimRight(cfg.PublicURL, "/"), now: cfg.Now, writes: cfg.Writes,
		onEvent: cfg.OnEvent, log: cfg.Logger, draftTTL: cfg.DraftTTL, retention: cfg.Retention,
		writesRetry: cfg.WritesRetry, closing: make(chan struct{}),
	}
	for _, a := range cfg.Actions {
		s.actions[a.Name()] = a
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

func (s *Service) prepare(ctx context.Context, p *Principal, req PrepareCall, undoes string) (*Operation, bool, error) {
	action, ok := s.actions[req.Action]
	if !ok {
		return nil, false, Errorf(CodeUnknownAction, "no such action %q; available: %s", req.Action, strings.Join(s.ActionNames(), ", ")).
			WithDetails(map[string]any{"available": s.ActionNames()})
	}
	if req.IdempotencyKey != "" && !idemPattern.MatchString(req.IdempotencyKey) {
		return nil, false, FieldErrors{{Field: "idempotency_key", Reason: "must be 1-128 printable ASCII characters without spaces"}}.Err()
	}
	// An undo is drafted from an operation the principal owns, with input
	// from that action's Undoer rather than the agent: the scope that let
	// the principal prepare the original covers its compensation.
	if undoes == "" && !p.AllowsAction(req.Action) {
		return nil, false, Errorf(CodeInsufficientScope, "principal %s may not prepare %s", p.ID, req.Action)
	}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		return nil, false, FieldErrors{{Field: "input", Reason: "required"}}.Err()
	}
	prep, err := action.Prepare(ctx, PrepareRequest{Principal: p, Input: req.Input})
	if err != nil {
		return nil, false, err
	}
	scope := prep.Scope
	if scope == "" {
		scope = req.Action
	}
	if undoes == "" && !p.Allows(scope) {
		return nil, false, Errorf(CodeInsufficientScope, "principal %s may not prepare %s", p.ID, scope).
			WithDetails(map[string]any{"scope": scope})
	}
	input, err := Canonical(prep.Input)
	if err != nil {
		return nil, false, err
	}
	hash, err := PayloadHash(req.Action, input, p.ID)
	if err != nil {
		return nil, false, err
	}
	attrs := map[string]string{}
	for k, v := range prep.Attrs {
		attrs[k] = v
	}
	route, err := s.policy.Resolve(req.Action, p, attrs)
	if err != nil {
		return nil, false, err
	}

	now := s.now().UTC()
	key := NewOperationKey()
	if req.IdempotencyKey != "" {
		b, fresh, err := s.store.BindIdempotency(ctx, p.ID, req.IdempotencyKey,
			IdemBinding{Operation: key, PayloadHash: hash}, s.draftTTL+s.retention)
		if err != nil {
			return nil, false, err
		}
		if b.PayloadHash != hash {
			return nil, false, Errorf(CodeIdempotencyKeyReused, "idempotency key %q was used for a different request", req.IdempotencyKey).
				WithDetails(map[string]any{"operation_key": b.Operation})
		}
		if !fresh {
			if existing, err := s.store.Get(ctx, b.Operation); err == nil {
				return existing, false, nil
			} else if ErrorCode(err) != CodeNotFound {
				return nil, false, err
			}
			// Bound but never created (a crash between the two steps, or a
			// concurrent twin still creating): create it under the bound key.
			key = b.Operation
		}
	}
	op := &Operation{
		Key: key, Action: req.Action, Principal: p.ID, OnBehalfOf: p.OnBehalfOf,
		Input: input, PayloadHash: hash, Preview: prep.Preview, State: prep.State, Route: route,
		IdempotencyKey: req.IdempotencyKey, Undoes: undoes, CreatedAt: now,
		Status: StatusDraft, ExpiresAt: now.Add(s.draftTTL), UpdatedAt: now,
	}
	if op.Preview.Fields == nil {
		op.Preview.Fields = []Field{}
	}
	ev := s.event(op, "prepared", "principal:"+p.ID, "")
	ev.Details = map[string]any{"route": route.Name}
	if err := s.store.Create(ctx, op, ev, s.draftTTL+s.retention); err != nil {
		if errors.Is(err, ErrExists) {
			existing, gerr := s.store.Get(ctx, key)
			if gerr != nil {
				return nil, false, gerr
			}
			if existing.PayloadHash != hash || existing.Principal != p.ID {
				return nil, false, Errorf(CodeIdempotencyKeyReused, "idempotency key %q was used for a different request", req.IdempotencyKey)
			}
			return existing, false, nil
		}
		return nil, false, err
	}
	s.emit(ev)
	return op, true, nil
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

// Get returns the principal's operation as of now. Returns not_found for
// unknown keys and for other principals' operations.
func (s *Service) Get(ctx context.Context, p *Principal, key string) (*Operation, error) {
	op, err := s.load(ctx, key)
	if err != nil {
		return nil, err
	}
	if p != nil && op.Principal != p.ID {
		return nil, notFound(key)
	}
	return op, nil
}

func notFound(key string) error {
	return Errorf(CodeNotFound, "no operation %s", key)
}

// load reads an operation and records its expiry if the window passed.
func (s *Service) load(ctx context.Context, key string) (*Operation, error) {
	if !ValidOperationKey(key) {
		return nil, Errorf(CodeNotFound, "no operation %q: keys look like op_ followed by 26 characters", key)
	}
	op, err := s.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if op.Status.Expirable() && op.EffectiveStatus(s.now()) == StatusExpired {
		return s.expire(ctx, op)
	}
	return op, nil
}

func (s *Service) expire(ctx context.Context, op *Operation) (*Operation, error) {
	ev := s.event(op, "expired", "system", "")
	ev.Status = StatusExpired
	if _, moved, err := s.store.Move(ctx, op.Key, MoveTransition{
		From: []Status{StatusDraft, StatusPending, StatusApproved}, To: StatusExpired, Now: s.now(),
		Event: ev, TTL: s.retention,
	}); err != nil {
		return nil, err
	} else if moved {
		s.emit(ev)
		s.wake(ctx, op.Key) // let workers update the messages
	}
	return s.store.Get(ctx, op.Key)
}

// Wait returns the operation once it changes, or after d, whichever comes
// first. An operation already terminal is returned at once.
func (s *Service) Wait(ctx context.Context, p *Principal, key string, d time.Duration) (*Operation, error) {
	if d <= 0 {
		return s.Get(ctx, p, key)
	}
	ch, cancel := s.store.Changes(key)
	defer cancel()
	op, err := s.Get(ctx, p, key)
	if err != nil || op.Status.Terminal() {
		return op, err
	}
	start := op.Version
	timer := time.NewTimer(d)
	defer timer.Stop()
	// The window may end while we wait; wake then to report expired.
	var expiry <-chan time.Time
	if op.Status.Expirable() {
		if until := op.ExpiresAt.Sub(s.now()); until < d {
			t := time.NewTimer(until + 10*time.Millisecond)
			defer t.Stop()
			expiry = t.C
		}
	}
	for {
		select {
		case <-ch:
			cur, err := s.Get(ctx, p, key)
			if err != nil || cur.Version != start {
				return cur, err
			}
		case <-expiry:
			return s.Get(ctx, p, key)
		case <-timer.C:
			return s.Get(ctx, p, key)
		case <-ctx.Done():
			return op, nil
		case <-s.closing:
			return s.Get(context.WithoutCancel(ctx), p, key)
		}
	}
}

// List returns the principal's operations, newest first, optionally only
// those in status.
func (s *Service) List(ctx context.Context, p *Principal, status Status) ([]*Operation, error) {
	if status != "" && !status.Valid() {
		return nil, FieldErrors{{Field: "status", Reason: "unknown status " + string(status)}}.Err()
	}
	ops, err := s.store.List(ctx, p.ID, 200)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := []*Operation{}
	for _, op := range ops {
		if status != "" && op.EffectiveStatus(now) != status {
			continue
		}
		out = append(out, op)
	}
	return out, nil
}

// Events returns the audit trail of the principal's operation.
func (s *Service) Events(ctx context.Context, p *Principal, key string) ([]Event, error) {
	if _, err := s.Get(ctx, p, key); err != nil {
		return nil, err
	}
	return s.store.Events(ctx, key)
}

// Send moves a draft to pending_approval and queues its notifications.
// Calling it again changes nothing and returns the current operation.
// Returns writes_disabled while the kill switch is on (nothing consumed),
// invalid_state for an expired, rejected or canceled operation.
func (s *Service) Send(ctx context.Context, p *Principal, key string) (*Operation, error) {
	op, err := s.Get(ctx, p, key)
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
	if err := s.guard(ctx, key); err != nil {
		return nil, err
	}
	before, err := s.store.Send(ctx, key, SendTransition{
		Now: now, ExpiresAt: expires, Jobs: s.planJobs(op), Event: ev, TTL: op.Route.ApprovalTTL + s.retention,
	})
	if err != nil {
		return nil, err
	}
	if before == StatusDraft {
		s.emit(ev)
		s.wake(ctx, key)
		// The end of the window is work too: expire and update messages.
		if err := s.store.WakeAt(ctx, key, "expiry", expires.Add(time.Second)); err != nil {
			s.log.Warn("schedule expiry", "operation", key, "err", err)
		}
	}
	cur, err := s.Get(ctx, p, key)
	if err != nil {
		return nil, err
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

// planJobs expands the route's notify list into one job per message.
func (s *Service) planJobs(op *Operation) []Job {
	var jobs []Job
	for _, spec := range op.Route.Notify {
		channel, target, _ := strings.Cut(spec, ":")
		pa, _ := s.notifiers[channel].(PerApprover)
		switch {
		case channel == "slack" && target != "dm",
			channel == "webhook" && (pa == nil || !pa.PerApprover(target)):
			jobs = append(jobs, Job{ID: spec, Channel: channel, Target: target})
		default:
			for _, a := range op.Route.Approvers {
				ap := s.policy.Approver(a)
				if ap == nil || (channel == "email" && ap.Email == "") || (channel == "slack" && ap.SlackUserID == "") {
					continue
				}
				jobs = append(jobs, Job{ID: spec + ":" + a, Channel: channel, Target: target, Approver: a,
					Link: channel == "email" || channel == "console" || channel == "webhook"})
			}
		}
	}
	return jobs
}

// Cancel ends a draft or pending operation. Canceling a canceled operation
// returns it unchanged. Returns invalid_state otherwise.
func (s *Service) Cancel(ctx context.Context, p *Principal, key string) (*Operation, error) {
	op, err := s.Get(ctx, p, key)
	if err != nil {
		return nil, err
	}
	actor := "operator"
	if p != nil {
		actor = "principal:" + p.ID
	}
	ev := s.event(op, "canceled", actor, "")
	ev.Status = StatusCanceled
	before, moved, err := s.store.Move(ctx, key, MoveTransition{
		From: []Status{StatusDraft, StatusPending}, To: StatusCanceled, Now: s.now(), Event: ev, TTL: s.retention,
	})
	if err != nil {
		return nil, err
	}
	if !moved && before != StatusCanceled {
		op.Status = before
		return nil, stateError(op, "cancel")
	}
	if moved {
		s.emit(ev)
		s.wake(ctx, key)
	}
	return s.store.Get(ctx, key)
}

// event starts an audit event for op.
func (s *Service) event(op *Operation, name, actor, channel string) Event {
	return Event{Time: s.now().UTC(), Operation: op.Key, Event: name, Actor: actor, Channel: channel,
		PayloadHash: op.PayloadHash, Status: op.Status}
}

// guardDelay is how long after a transition the safety wake-up fires.
const guardDelay = 30 * time.Second

// guard schedules a safety wake-up before a transition that creates work.
// The normal wake-up follows the transition at once; if this process dies
// between the two, the guard still brings the workers to the operation.
// (Waking before the transition instead could be consumed before the
// transition commits, and acknowledged as nothing to do.)
func (s *Service) guard(ctx context.Context, key string) error {
	return s.store.WakeAt(ctx, key, "guard", s.now().Add(guardDelay))
}

// wake asks the workers to look at the operation now. A failure is only
// logged: the guard covers it.
func (s *Service) wake(ctx context.Context, key string) {
	if err := s.store.Wake(ctx, key); err != nil {
		s.log.Warn("wake failed; the guard timer will retry", "operation", key, "err", err)
	}
}

func (s *Service) emit(ev Event) {
	for _, f := range s.onEvent {
		f(ev)
	}
}
