package approval

import (
	"errors"
	"log/slog"
	"sort"
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
	// passkeys serves step-up routes (stepup.go), nil: none; passkeyStore
	// is the Store's part in them.
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
	// Passkeys verifies step-up assertions (SPEC §11); the Store keeps
	// the passkeys (PasskeyStore). nil: step_up routes refuse every
	// decision.
	Passkeys Passkeys
	// Callbacks delivers status changes to the principals' webhooks; the
	// Store keeps their cursor (CallbackStore). nil: none. OnCallback hears
	// the outcome of every attempt ("delivered", "failed"), for metrics.
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
	s.passkeyStore, s.callbackStore = cfg.Store, cfg.Store
	for _, a := range cfg.Actions {
		s.actions[a.Name()] = a
	}
	s.actions[GrantAction] = grantAction{s}
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
	// Operations of Previewer actions are kept without their preview: the
	// service decides and renders it back, the store just stores
	// (previewstore.go).
	s.store = previewing{Store: cfg.Store, p: &previews{actions: s.actions}, log: s.log}
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

// step starts a transition that records ev.
func (s *Service) step(ev Event) Step {
	return Step{Tx: RandomToken(10), Now: ev.Time, Event: ev, Retention: s.retention, DraftRetention: s.draftRetention}
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
