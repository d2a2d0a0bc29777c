package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/notify/console"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
)

// Main is one running service: everything `countersign serve` starts,
// built from the environment, so that tests can start the whole service
// on 127.0.0.1:0 and stop it again (several at once on one Redis).
type Main struct {
	Env    func(string) (string, bool)
	Stderr io.Writer
	// Workers is the number of queue workers (default 4; -1 for none,
	// which tests use to stop a service between two steps).
	Workers int
	// Now overrides the clock (tests).
	Now func() time.Time

	// Set by Open.
	Addr      string // the address it listens on
	PublicURL string
	DevAPIKey string // development mode only
	Service   *approval.Service
	Store     *store.Redis

	log     *slog.Logger
	rdb     redis.UniversalClient
	mini    *miniredis.Miniredis
	server  *web.Server
	ln      net.Listener
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []func() error
}

func serve(ctx context.Context, env func(string) (string, bool), stderr io.Writer) error {
	m := &Main{Env: env, Stderr: stderr}
	if err := m.Open(ctx); err != nil {
		_ = m.Close()
		return err
	}
	<-ctx.Done()
	m.log.Info("shutting down")
	return m.Close()
}

func (m *Main) get(name, def string) string {
	if v, ok := m.Env(name); ok && v != "" {
		return v
	}
	return def
}

// Open builds the service from the environment, listens and starts the
// workers. On error, Close releases what was started.
func (m *Main) Open(ctx context.Context) error {
	if m.Stderr == nil {
		m.Stderr = os.Stderr
	}
	if m.Workers == 0 {
		m.Workers = 4
		if n, err := strconv.Atoi(m.get("COUNTERSIGN_WORKERS", "")); err == nil && n > 0 {
			m.Workers = n
		}
	}
	m.log = slog.New(slog.NewJSONHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	useRedisLogger(m.log)
	now := m.Now
	if now == nil {
		now = time.Now
	}

	// Configuration: a policy file, or development mode.
	var file *config.File
	dev := m.get("COUNTERSIGN_CONFIG", "") == ""
	if dev {
		file = devConfig()
	} else {
		var err error
		if file, err = config.Load(m.get("COUNTERSIGN_CONFIG", "")); err != nil {
			return err
		}
	}
	policy := file.Policy()
	if dev {
		key := m.get("COUNTERSIGN_DEV_API_KEY", "")
		if key == "" {
			key, _ = newAPIKey()
		}
		m.DevAPIKey = key
		policy.Principals[0].KeyHash = apiKeyHash(key)
	}

	writes := true
	switch w := strings.ToLower(m.get("COUNTERSIGN_WRITES", "on")); w {
	case "on", "true", "1":
	case "off", "false", "0":
		writes = false
	default:
		return fmt.Errorf("COUNTERSIGN_WRITES must be on or off, not %q", w)
	}

	// Store.
	if u := m.get("COUNTERSIGN_REDIS_URL", ""); u != "" {
		rdb, err := store.Open(u)
		if err != nil {
			return err
		}
		m.rdb = rdb
	} else {
		mini, rdb, stop, err := store.Embedded()
		if err != nil {
			return err
		}
		m.mini, m.rdb = mini, rdb
		m.closers = append(m.closers, func() error { stop(); return nil })
	}
	m.closers = append(m.closers, m.rdb.Close)
	m.Store = store.New(m.rdb, m.log)
	m.closers = append(m.closers, m.Store.Close)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.Store.Ping(pctx); err != nil {
		return fmt.Errorf("redis is not reachable: %w", err)
	}

	// Listener first: the public URL defaults to the bound address.
	ln, err := net.Listen("tcp", m.get("COUNTERSIGN_LISTEN", "127.0.0.1:8080"))
	if err != nil {
		return err
	}
	m.ln = ln
	m.Addr = ln.Addr().String()
	m.PublicURL = strings.TrimRight(m.get("COUNTERSIGN_PUBLIC_URL", "http://"+m.Addr), "/")

	links := approval.RandomKeyring()
	if k := m.get("COUNTERSIGN_LINK_KEYS", ""); k != "" {
		if links, err = approval.ParseKeyring(k); err != nil {
			ln.Close()
			return err
		}
	} else if !dev {
		m.log.Warn("COUNTERSIGN_LINK_KEYS is not set: using a random key; links die with this process and replicas will not accept each other's links")
	}

	// Audit log and metrics subscribe to every event.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	events := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "countersign_events_total", Help: "Audit events by event name and resulting status.",
	}, []string{"event", "status"})
	reg.MustRegister(events)
	audit, err := m.auditWriter()
	if err != nil {
		ln.Close()
		return err
	}

	eff, err := m.effects(file, dev)
	if err != nil {
		ln.Close()
		return err
	}
	m.closers = append(m.closers, eff.close...)
	svc, err := approval.NewService(approval.Config{
		Store: m.Store, Policy: policy, Actions: eff.actions, Notifiers: eff.notifiers, Links: links,
		PublicURL: m.PublicURL, Now: now, Writes: func() bool { return writes }, Logger: m.log,
		OnEvent: []func(approval.Event){
			audit,
			func(e approval.Event) { events.WithLabelValues(e.Event, string(e.Status)).Inc() },
		},
		DraftTTL: time.Duration(file.Settings.DraftTTL), Retention: time.Duration(file.Settings.Retention),
	})
	if err != nil {
		ln.Close()
		return err
	}
	m.Service = svc

	m.server, err = web.New(web.Config{
		Service: svc, Limiter: m.Store, Ready: m.Store.Ping, PublicURL: m.PublicURL, Registry: reg,
		Logger: m.log, DevMail: eff.devMail, Mounts: eff.mounts(svc, m), APIRate: file.Settings.APIRate,
	})
	if err != nil {
		ln.Close()
		return err
	}
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = wcancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.server.App().Listener(ln); err != nil {
			m.log.Error("http server stopped", "err", err)
		}
	}()
	if m.Workers > 0 {
		m.wg.Add(2)
		go func() { defer m.wg.Done(); svc.RunWorkers(wctx, m.Store, hostname(), m.Workers) }()
		go func() { defer m.wg.Done(); svc.RunTimers(wctx, m.Store, 250*time.Millisecond) }()
	}
	m.log.Info("countersign serving", "listen", m.Addr, "public_url", m.PublicURL, "writes", writes,
		"development", dev, "actions", svc.ActionNames())
	if dev {
		m.devBanner()
	}
	if m.mini != nil && !dev {
		m.log.Warn("COUNTERSIGN_REDIS_URL is not set: using an embedded in-memory Redis; ALL DATA IS LOST ON EXIT")
	}
	return nil
}

func hostname() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}

// auditWriter writes each event as one JSON line to stderr, or to the
// file named by COUNTERSIGN_AUDIT_FILE.
func (m *Main) auditWriter() (func(approval.Event), error) {
	w := m.Stderr
	if path := m.get("COUNTERSIGN_AUDIT_FILE", ""); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("audit file: %w", err)
		}
		m.closers = append(m.closers, f.Close)
		w = f
	}
	var mu sync.Mutex
	return func(e approval.Event) {
		line, _ := json.Marshal(struct {
			Audit approval.Event `json:"audit"`
		}{e})
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(append(line, '\n'))
	}, nil
}

func (m *Main) devBanner() {
	storeNote := "an embedded in-memory Redis: ALL DATA IS LOST WHEN THIS PROCESS EXITS"
	if m.mini == nil {
		storeNote = "the Redis at COUNTERSIGN_REDIS_URL"
	}
	fmt.Fprintf(m.Stderr, `
==========================================================================
 countersign DEVELOPMENT MODE (no COUNTERSIGN_CONFIG)
   store:     %s
   API:       %s/v1/operations
   agent:     dev-agent, API key: %s
   approver:  "you" - approval links are printed here, never sent to the agent
   email:     email.send delivers to %s
==========================================================================

`, storeNote, m.PublicURL, m.DevAPIKey, m.devMailNote())
}

func (m *Main) devMailNote() string {
	if m.get("COUNTERSIGN_SMTP_URL", "") != "" {
		return "the SMTP server at COUNTERSIGN_SMTP_URL"
	}
	return m.PublicURL + "/dev/mail (nothing leaves this machine)"
}

// devConfig is the policy of development mode: one agent allowed every
// action, one approver "you" reached through the console.
func devConfig() *config.File {
	return &config.File{
		Principals: []config.PrincipalSpec{{ID: "dev-agent", Scopes: []string{"*"}}},
		Approvers:  []config.ApproverSpec{{ID: "you", Name: "You (development)"}},
		Routes: []config.RouteSpec{{Name: "development", Approvers: config.Who{IDs: []string{"you"}},
			Required: 1, Notify: []string{"console"}}},
	}
}

// Close stops the server (ending long-polls), the workers, and the store.
func (m *Main) Close() error {
	var errs []error
	if m.server != nil {
		// Requests in flight get a few seconds; long-polls end at once. A
		// client connection that never finishes a request (fasthttp does
		// not always count it as idle) must not hold the shutdown up.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := m.server.Shutdown(ctx); err != nil {
			m.log.Warn("http shutdown did not finish in time; closing anyway", "err", err)
		}
		cancel()
	}
	if m.ln != nil {
		// Shutdown right after Open can run before the server registered the
		// listener; closing it ourselves makes the accept loop end anyway.
		_ = m.ln.Close()
	}
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	for i := len(m.closers) - 1; i >= 0; i-- {
		if err := m.closers[i](); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	m.closers = nil
	m.mini = nil
	return errors.Join(errs...)
}

// effects are the actions and channels built from the configuration.
type effects struct {
	actions   []approval.Action
	notifiers map[string]approval.Notifier
	devMail   web.DevMail
	close     []func() error
	extra     []func(*approval.Service, *Main) []web.Mount
}

func (e *effects) mounts(svc *approval.Service, m *Main) []web.Mount {
	var out []web.Mount
	for _, f := range e.extra {
		out = append(out, f(svc, m)...)
	}
	return out
}

// effects builds the actions and notifiers the configuration asks for.
func (m *Main) effects(file *config.File, dev bool) (*effects, error) {
	e := &effects{notifiers: map[string]approval.Notifier{
		"console": &console.Console{W: m.Stderr},
	}}
	// One function per family of effects, each in its own file.
	for _, add := range []func(*effects, *config.File, bool) error{
		m.emailEffects, m.slackEffects, m.httpEffects, m.webhookEffects, m.mcpEffects,
	} {
		if err := add(e, file, dev); err != nil {
			return nil, err
		}
	}
	return e, nil
}
