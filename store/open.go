package store

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Open connects to COUNTERSIGN_REDIS_URL. Accepted forms:
//
//	redis://[user:pass@]host:port[/db]        one server (TLS with rediss://)
//	redis://[user:pass@]h1:p1,h2:p2           Redis Cluster (seed nodes)
//	h1:p1,h2:p2                               Redis Cluster
//	redis-sentinel://[:pass@]s1:p1,s2:p2/mymaster[/db]   Sentinel
//
// Errors never contain the password. Timeouts are bounded (see bounded)
// unless the URL sets them.
func Open(raw string) (redis.UniversalClient, error) {
	switch {
	case strings.HasPrefix(raw, "redis-sentinel://"):
		return openSentinel(raw)
	case !strings.Contains(raw, "://") && strings.Contains(raw, ","):
		opt := &redis.ClusterOptions{Addrs: strings.Split(raw, ",")}
		bounded(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.MaxRetries, &opt.ContextTimeoutEnabled)
		reconnecting(&opt.Dialer, &opt.DialerRetries, opt.DialTimeout, opt.TLSConfig)
		return newCluster(opt), nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
		return nil, fmt.Errorf("redis URL %q: use redis://, rediss://, redis-sentinel:// or host:port,host:port", redact(raw))
	}
	if strings.Contains(u.Host, ",") {
		hosts := strings.Split(u.Host, ",")
		q := u.Query()
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		u.Host, u.RawQuery = hosts[0], q.Encode()
		opt, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("redis cluster URL %q: %s", redact(raw), scrub(err, u))
		}
		bounded(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.MaxRetries, &opt.ContextTimeoutEnabled)
		reconnecting(&opt.Dialer, &opt.DialerRetries, opt.DialTimeout, opt.TLSConfig)
		return newCluster(opt), nil
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %s", redact(raw), scrub(err, u))
	}
	bounded(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.MaxRetries, &opt.ContextTimeoutEnabled)
	reconnecting(&opt.Dialer, &opt.DialerRetries, opt.DialTimeout, opt.TLSConfig)
	return redis.NewClient(opt), nil
}

// clusterReload is how often a cluster client re-reads the slot map while
// it is in use. go-redis re-reads it on MOVED (a coordinated failover, a
// resharding) but not when a master dies: it keeps dialing the dead
// address until the map is older than this (go-redis's default, 60 s, left
// every shard of a killed master unavailable for up to a minute after its
// replica was promoted). One CLUSTER SLOTS every 2 s costs nothing.
const clusterReload = 2 * time.Second

func newCluster(opt *redis.ClusterOptions) *redis.ClusterClient {
	if opt.ClusterStateReloadInterval == 0 {
		opt.ClusterStateReloadInterval = clusterReload
	}
	return redis.NewClusterClient(opt)
}

// Timeouts of every client: while Redis is unreachable or stalled, a
// command fails within about a second and is retried once, so a request
// answers 503 unavailable well within 5 s rather than after go-redis's
// defaults (5 s to dial, 3 s to read, three retries); each request's
// deadline (web, mcpserver) bounds the whole of its calls. Blocking commands
// (XREADGROUP BLOCK) get their block time on top (go-redis does that).
const (
	dialTimeout  = time.Second
	readTimeout  = time.Second
	writeTimeout = time.Second
	poolTimeout  = 1500 * time.Millisecond
	maxRetries   = 1
)

// bounded sets the timeouts and retries that the URL left unset (zero),
// and makes the client honour its callers' context deadlines (go-redis
// ignores them by default, so a request's deadline would not cut a
// pipeline short).
func bounded(dial, read, write, pool *time.Duration, retries *int, ctxTimeouts *bool) {
	*ctxTimeouts = true
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{dial, dialTimeout}, {read, readTimeout}, {write, writeTimeout}, {pool, poolTimeout}} {
		if *d.p == 0 {
			*d.p = d.v
		}
	}
	if *retries == 0 {
		*retries = maxRetries
	}
}

// redialEvery is how often a dial in progress starts a fresh connect to
// an address that has not answered yet.
const redialEvery = 100 * time.Millisecond

// reconnecting makes a client find Redis again within about a second of
// the network coming back, however long it was gone (issue 20: 4.4–6.8 s
// of 503 after a 45 s partition, 0.3 s after a 10 s one). Two things in
// go-redis's pool outlived the partition:
//
//   - every dial was tried 5 times (DialerRetries), each up to DialTimeout,
//     in a goroutine holding a pool turn and a dial permit: a sequence
//     begun during the partition went on for up to 5.4 s after it, and
//     requests waited behind it for a turn. One attempt per dial now; the
//     command's own retry (maxRetries) dials again.
//   - after PoolSize failed dials the pool fails every dial at once and
//     probes with one dial a second until one succeeds. A connect whose
//     SYN the partition swallowed is only re-sent by the kernel after 1 s,
//     past DialTimeout, so the probe in progress when the network came
//     back failed too and the next came 1 s later. The dialer here starts a
//     fresh connect every redialEvery until one succeeds or the attempt's
//     time is up, so a dial in progress (the probe included) connects
//     within redialEvery of the network's return. What remains is the
//     probe's one-second pause, when the network comes back just after a
//     probe gave up: at most about a second.
//
// A refused connect is tried again within the attempt as well, so a Redis
// restarting within a second is found within redialEvery, and refused
// dials do not fill the breaker's count in a moment. A dialer set by the
// caller and a retry count set in the URL are kept. Sentinel clients keep
// go-redis's dialing (see openSentinel).
func reconnecting(dialer *func(context.Context, string, string) (net.Conn, error), retries *int, timeout time.Duration, tlsc *tls.Config) {
	if *retries == 0 {
		*retries = 1
	}
	if *dialer != nil {
		return
	}
	if timeout <= 0 {
		return // no bound on an attempt: keep go-redis's dialer
	}
	*dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		conn, err := redial(ctx, network, addr)
		if err != nil || tlsc == nil {
			return conn, err
		}
		cfg := tlsc.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// redial connects to addr, starting a new connect every redialEvery while
// none has succeeded, until ctx ends; the first to connect wins and the
// others are closed. A refused connect is tried again too: a Redis
// restarting within the attempt's time is found within redialEvery.
func redial(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		c   net.Conn
		err error
	}
	results := make(chan result)
	var d net.Dialer
	started, done := 0, 0
	tick := time.NewTicker(redialEvery)
	defer tick.Stop()
	start := func() {
		started++
		go func() {
			c, err := d.DialContext(ctx, network, addr)
			results <- result{c, err}
		}()
	}
	start()
	var winner net.Conn
	var lastErr error
	for {
		if done == started && (winner != nil || ctx.Err() != nil) {
			break
		}
		select {
		case r := <-results:
			done++
			switch {
			case r.err == nil && winner == nil:
				winner = r.c
				cancel() // the others give up
			case r.err == nil:
				r.c.Close()
			default:
				lastErr = r.err
			}
		case <-tick.C:
			if winner == nil && ctx.Err() == nil {
				start()
			}
		case <-ctx.Done():
			// wait for the connects in flight to end (they see ctx too)
			if done < started {
				r := <-results
				done++
				if r.err == nil && winner == nil {
					winner = r.c
				} else if r.err == nil {
					r.c.Close()
				} else {
					lastErr = r.err
				}
			}
		}
	}
	if winner != nil {
		return winner, nil
	}
	return nil, lastErr
}

func openSentinel(raw string) (redis.UniversalClient, error) {
	u, err := url.Parse(strings.Replace(raw, "redis-sentinel://", "http://", 1))
	if err != nil {
		return nil, fmt.Errorf("sentinel URL %q is not valid", redact(raw))
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if parts[0] == "" {
		return nil, fmt.Errorf("sentinel URL %q: name the master: redis-sentinel://host:port/mymaster", redact(raw))
	}
	opt := &redis.FailoverOptions{MasterName: parts[0], SentinelAddrs: strings.Split(u.Host, ",")}
	// Not reconnecting: the failover client resolves the master's address
	// again on each of go-redis's dial retries, which is what finds a newly
	// promoted master quickly (one attempt per dial made the first reads
	// after a failover up to a second later, TestSentinelFailoverKeepsServing).
	bounded(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.MaxRetries, &opt.ContextTimeoutEnabled)
	if len(parts) > 1 {
		if opt.DB, err = strconv.Atoi(parts[1]); err != nil {
			return nil, fmt.Errorf("sentinel URL %q: database must be a number", redact(raw))
		}
	}
	if u.User != nil {
		opt.Password, _ = u.User.Password()
		opt.SentinelPassword = opt.Password
	}
	return redis.NewFailoverClient(opt), nil
}

// redact hides the password of a URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i := strings.Index(raw, "@"); i >= 0 {
			return "…" + raw[i:]
		}
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

func scrub(err error, u *url.URL) string {
	s := err.Error()
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			s = strings.ReplaceAll(s, p, "xxxxx")
		}
	}
	return s
}

// Embedded starts an in-memory Redis (miniredis) for development mode and
// returns it with a client and a function that stops both. Keys expire in
// real time, as on a real server.
func Embedded() (*miniredis.Miniredis, redis.UniversalClient, func(), error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, nil, nil, fmt.Errorf("embedded redis: %w", err)
	}
	stop := RealTimeTTL(m)
	return m, redis.NewClient(&redis.Options{Addr: m.Addr()}), func() { stop(); m.Close() }, nil
}

// RealTimeTTL makes miniredis expire keys as time passes, by fast-forwarding
// it ten times a second. (miniredis's own ClockTTL does the same on every
// command, which sorts every key each time and grows slow as keys pile up.)
func RealTimeTTL(m *miniredis.Miniredis) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	// stop returns once the fast-forwarding has: the caller may close m.
	var once sync.Once
	return func() { once.Do(func() { close(done) }); <-exited }
}
