package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/internal/prom"
	"github.com/countersign/countersign/internal/telemetry"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"
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
	// Now overrides the service's clock altogether (tests that drive time).
	// Without it the service reads Redis's time (store.Clock), measured
	// against SystemClock.
	Now func() time.Time
	// SystemClock is this replica's own clock (default time.Now); tests
	// set it off by some seconds to show that nothing follows it.
	SystemClock func() time.Time
	// TracerProvider overrides the tracing that OTEL_EXPORTER_OTLP_ENDPOINT
	// configures (tests record spans in memory).
	TracerProvider trace.TracerProvider

	// Set by Open.
	Addr      string // the address it listens on
	PublicURL string
	DevAPIKey string // development mode only
	// DevOperatorKey is dev-operator's key (development mode only).
	DevOperatorKey string
	// DebugAddr is where the pprof listener is (COUNTERSIGN_DEBUG_LISTEN), or "".
	DebugAddr string
	Service   *approval.Service
	Store     *store.Redis

	// ReceiptKeyID is the kid that signs receipts.
	ReceiptKeyID string
	// AuditPath is the file the audit is written to, "" for stderr.
	AuditPath string

	// devWaitingLink and devSignInLink open development mode's waiting
	// page and sign-in: printed in the banner only, held nowhere else.
	devWaitingLink, devSignInLink string

	log     *slog.Logger
	tracing *telemetry.Tracing
	rdb     redis.UniversalClient
	mini    *miniredis.Miniredis
	server  *web.Server
	ln      net.Listener
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []func() error
}

func init() { register(newServeCmd) }

func newServeCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the service: REST API, approval pages, Slack, Teams, MCP at /mcp, workers, metrics",
		Long: `countersign serve runs the service until it is stopped (SIGINT or SIGTERM).

Without COUNTERSIGN_CONFIG it runs in development mode: an embedded in-memory Redis
(unless COUNTERSIGN_REDIS_URL is set), a principal dev-agent and an operator
dev-operator whose keys are printed at start (fixed with COUNTERSIGN_DEV_API_KEY and
COUNTERSIGN_DEV_OPERATOR_KEY), one approver "you" whose approval links are printed
here, and email.send delivering to /dev/mail unless COUNTERSIGN_SMTP_URL is set. The
banner also prints, for this terminal only, the link of a page listing what waits for
"you" and a single-use sign-in to /inbox and /console.

It takes no flags: configuration is the environment, among others
  COUNTERSIGN_LISTEN       listen address (default 127.0.0.1:8080)
  COUNTERSIGN_PUBLIC_URL   base URL of approval links
  COUNTERSIGN_CONFIG       the YAML policy file
  COUNTERSIGN_REDIS_URL    redis://, rediss://, redis-sentinel:// or a cluster's addresses
  COUNTERSIGN_REDIS_MIN_REPLICAS   replicas each transition waits for: auto (default) or a number
  COUNTERSIGN_LINK_KEYS    kid:base64key[,…] shared by all replicas
  COUNTERSIGN_WRITES       on (default) or off, the kill switch
  COUNTERSIGN_SMTP_URL     smtp:// or smtps:// for approval emails and email.send
  SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET   the Slack app (SLACK_APP_TOKEN: Socket Mode)
  TEAMS_APP_ID, TEAMS_APP_PASSWORD, TEAMS_TENANT_ID   the Microsoft Teams bot
See README.md for all of them.`,
		Example: `  countersign serve
  COUNTERSIGN_DEV_API_KEY=devkey countersign serve`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), c.env, c.stderr)
		},
	}
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
	m.log = newLogger(m.Stderr)
	useRedisLogger(m.log)
	if err := m.debugListen(); err != nil {
		return err
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
		if err := m.checkEnv(m.get("COUNTERSIGN_CONFIG", ""), file); err != nil {
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
		opKey := m.get("COUNTERSIGN_DEV_OPERATOR_KEY", "")
		if opKey == "" {
			opKey, _ = newOperatorKey()
		}
		if opKey == key {
			return errors.New("COUNTERSIGN_DEV_OPERATOR_KEY must differ from COUNTERSIGN_DEV_API_KEY: an operator key never works on the agent API")
		}
		m.DevOperatorKey = opKey
		policy.Operators[0].KeyHash = apiKeyHash(opKey)
	}

	writes := true
	switch w := strings.ToLower(m.get("COUNTERSIGN_WRITES", "on")); w {
	case "on", "true", "1":
	case "off", "false", "0":
		writes = false
	default:
		return fmt.Errorf("COUNTERSIGN_WRITES must be on or off, not %q", w)
	}

	// Telemetry first: the store's client reports its errors and spans.
	if err := m.openTelemetry(ctx); err != nil {
		return err
	}
	reg := prom.NewRegistry()
	reg.MustRegister(prom.GoCollector(), prom.ProcessCollector())
	metrics, err := telemetry.NewMetrics(reg, buildVersion())
	if err != nil {
		return err
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
	m.rdb.AddHook(telemetry.NewRedisHook(metrics, m.tracing.Provider))
	m.Store = store.New(m.rdb, m.log)
	m.Store.OnDecodeError = metrics.OnDecodeError
	m.closers = append(m.closers, m.Store.Close)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.Store.Ping(pctx); err != nil {
		return fmt.Errorf("redis is not reachable: %w", err)
	}
	if err := m.Store.Init(pctx, file.Settings.Shards); err != nil {
		return err
	}
	// One clock for every replica: Redis's time (windows, expiry,
	// reminders, escalations, timers, audit times).
	now := m.Now
	var clock *store.Clock
	if now == nil {
		local := m.SystemClock
		if d, err := time.ParseDuration(m.get("COUNTERSIGN_FAULTS_CLOCK_OFFSET", "")); err == nil && d != 0 && local == nil {
			// The fault suite's replica whose own clock is wrong (faults/clock_test.go).
			m.log.Warn("COUNTERSIGN_FAULTS_CLOCK_OFFSET: this replica's own clock is set off for a fault test", "offset", d.String())
			local = func() time.Time { return time.Now().Add(d) }
		}
		clock = store.NewClock(m.rdb, local, m.log)
		if err := clock.Sync(pctx); err != nil {
			return fmt.Errorf("redis is not reachable: %w", err)
		}
		now = clock.Now
	}
	if !dev {
		// An evicted key is a lost operation: refuse such a Redis.
		warnings, err := m.Store.Check(pctx)
		if err != nil {
			return err
		}
		for _, w := range warnings {
			m.log.Warn(w)
		}
		// What each transition waits for before it is acknowledged or a
		// claim lets an effect start (docs/reliability.md).
		wait, err := durationEnv(m.get("COUNTERSIGN_REDIS_WAIT_TIMEOUT", ""), "COUNTERSIGN_REDIS_WAIT_TIMEOUT")
		if err != nil {
			return err
		}
		d, warnings, err := m.Store.ConfigureDurability(pctx, m.get("COUNTERSIGN_REDIS_MIN_REPLICAS", "auto"), wait,
			strings.HasPrefix(m.get("COUNTERSIGN_REDIS_URL", ""), "redis-sentinel://"))
		if err != nil {
			return err
		}
		for _, w := range warnings {
			m.log.Warn(w)
		}
		m.log.Info("redis durability", "wait_for_replicas", d.Replicas, "wait_timeout", d.Timeout.String(), "single_node_fsync_always", d.FsyncAlways)
	}

	// Listener first: the public URL defaults to the bound address.
	ln, err := net.Listen("tcp", m.get("COUNTERSIGN_LISTEN", "127.0.0.1:8080"))
	if err != nil {
		return err
	}
	m.ln = ln
	m.Addr = ln.Addr().String()
	m.PublicURL = strings.TrimRight(m.get("COUNTERSIGN_PUBLIC_URL", "http://"+m.Addr), "/")
	if m.get("COUNTERSIGN_PUBLIC_URL", "") == "" {
		if host, _, _ := net.SplitHostPort(m.Addr); !dev || net.ParseIP(host).IsUnspecified() {
			m.log.Warn("COUNTERSIGN_PUBLIC_URL is not set: approval links and receipts name " + m.PublicURL +
				", the address this process listens on, which approvers on other machines cannot open; set it to the URL people reach the service at")
		}
	}

	links := approval.RandomKeyring()
	if k := m.get("COUNTERSIGN_LINK_KEYS", ""); k != "" {
		if links, err = approval.ParseKeyring(k); err != nil {
			ln.Close()
			return err
		}
	} else if !dev {
		m.log.Warn("COUNTERSIGN_LINK_KEYS is not set: using a random key; links die with this process and replicas will not accept each other's links")
	}

	receipts, generated, err := m.receiptSigner()
	if err != nil {
		ln.Close()
		return err
	}
	m.ReceiptKeyID = receipts.KeyID()
	if generated && !dev {
		m.log.Warn("COUNTERSIGN_RECEIPT_KEYS is not set: receipts are signed with a generated key that dies with this process; replicas publish different keys", "kid", receipts.KeyID())
	}

	principals := make([]string, len(policy.Principals))
	for i, p := range policy.Principals {
		principals[i] = p.ID
	}
	if err := telemetry.RegisterGauges(reg, m.Store, func() []string { return principals }, now); err != nil {
		ln.Close()
		return err
	}
	auditOut, err := m.auditOutput(dev)
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
	ppl, err := m.peopleFor(file, m.PublicURL)
	if err != nil {
		ln.Close()
		return err
	}
	hooks, err := m.callbacks(file)
	if err != nil {
		ln.Close()
		return err
	}
	var cbs approval.Callbacks
	if hooks != nil {
		cbs = hooks
	}
	// The service sees the store, channels and actions measured and traced.
	traced := telemetry.TraceStore(m.Store, m.tracing.Provider)
	svc, err := approval.NewService(approval.Config{Passkeys: ppl.passkeys,
		Callbacks: cbs, OnCallback: metrics.OnCallback,
		Store: traced, Policy: policy, Links: links,
		Actions:   telemetry.WrapActions(eff.actions, metrics, m.tracing.Provider),
		Notifiers: telemetry.WrapNotifiers(eff.notifiers, metrics, m.tracing.Provider),
		Receipts:  receipts, PublicURL: m.PublicURL, Now: now, Writes: func() bool { return writes }, Logger: m.log,
		OnEvent:  []func(approval.Event){metrics.OnEvent},
		DraftTTL: time.Duration(file.Settings.DraftTTL), Retention: time.Duration(file.Settings.Retention),
		DraftRetention: time.Duration(file.Settings.DraftRetention),
		ExecutionLease: time.Duration(file.Settings.ExecutionLease),
	})
	if err != nil {
		ln.Close()
		return err
	}
	m.Service = svc

	eff.console.Now = now
	var doors *web.DevDoors
	if dev {
		doors, m.devWaitingLink, m.devSignInLink = web.NewDevDoors(web.DevConfig{
			Approver: devApprover, Operator: devOperator, Name: devApproverName,
			Link: eff.console.Link, Terminal: m.Stderr,
		}, m.PublicURL)
	}
	m.server, err = web.New(web.Config{
		Service: svc, Limiter: m.Store, Ready: m.Store.Ready, PublicURL: m.PublicURL, Registry: reg,
		Logger: m.log, DevMail: eff.devMail, Mounts: eff.mounts(svc, m),
		JWKS: receipts.JWKS(), TrustedProxies: strings.Split(m.get("COUNTERSIGN_TRUSTED_PROXIES", ""), ","),
		AuditHead: func(ctx context.Context) (string, audit.HeadClaims, error) {
			return audit.SignHead(ctx, m.Store, receipts, m.PublicURL, now())
		},
		SignIn: ppl.signIn, Sessions: m.Store, SessionTTL: ppl.sessionTTL, Dev: doors,
		Tracer: m.tracing.Provider, BodyLimit: int(file.Settings.MaxRequestBytes),
		Tools: mcpTools(svc, eff.gatewayFor(svc)), CallTool: callTool(eff.gatewayFor(svc)),
		Upstreams: upstreamStatus(eff.pool),
	})
	if err != nil {
		ln.Close()
		return err
	}
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = wcancel
	if clock != nil {
		m.wg.Add(1)
		go func() { defer m.wg.Done(); clock.Run(wctx) }()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.server.App().Listener(ln); err != nil {
			m.log.Error("http server stopped", "err", err)
		}
	}()
	if m.Workers > 0 {
		// The audit log is written off the request path, from Redis, where
		// every event already is: one replica at a time seals it.
		sealer := &audit.Sealer{Source: m.Store, Out: auditOut, Signer: receipts, Log: m.log, Now: now, Holder: hostname() + "-" + approval.RandomToken(4)}
		m.wg.Add(3)
		go func() { defer m.wg.Done(); svc.RunWorkers(wctx, traced, hostname(), m.Workers) }()
		go func() { defer m.wg.Done(); svc.RunTimers(wctx, m.Store, 250*time.Millisecond) }()
		go func() { defer m.wg.Done(); sealer.Run(wctx) }()
	}
	m.log.Info("countersign serving", "listen", m.Addr, "public_url", m.PublicURL, "writes", writes,
		"development", dev, "actions", svc.ActionNames())
	if dev {
		m.devBanner()
	}
	if !dev && len(policy.Operators) == 0 {
		m.log.Info("the policy file has no operators: the admin API and countersign ops cannot be used (countersign keygen --operator)")
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

// auditOutput is where the sealed audit log goes: stderr, or the file
// named by COUNTERSIGN_AUDIT_FILE (appended to).
//
// In development mode the audit goes to a file of its own by default (the
// banner says where), so that the terminal keeps the banner and the
// approval notices instead of burying the link among JSON lines.
func (m *Main) auditOutput(dev bool) (io.Writer, error) {
	path := m.get("COUNTERSIGN_AUDIT_FILE", "")
	if path == "" && dev {
		dir, err := os.MkdirTemp("", "countersign-dev-")
		if err != nil {
			return nil, fmt.Errorf("audit file: %w", err)
		}
		path = filepath.Join(dir, "audit.jsonl")
	}
	if path == "" {
		return m.Stderr, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit file: %w", err)
	}
	m.AuditPath = path
	m.closers = append(m.closers, f.Close)
	return f, nil
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
	if m.tracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := m.tracing.Shutdown(ctx); err != nil {
			m.log.Warn("exporting the last spans failed", "err", err)
		}
		cancel()
		m.tracing = nil
	}
	return errors.Join(errs...)
}

// durationEnv parses an optional duration setting ("" is zero).
func durationEnv(v, name string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s must be a duration such as 500ms, not %q", name, v)
	}
	return d, nil
}
