package store

import (
	"fmt"
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
		return newCluster(opt), nil
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %s", redact(raw), scrub(err, u))
	}
	bounded(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout, &opt.MaxRetries, &opt.ContextTimeoutEnabled)
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
	done := make(chan struct{})
	go func() {
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
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}
