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
// Errors never contain the password.
func Open(raw string) (redis.UniversalClient, error) {
	switch {
	case strings.HasPrefix(raw, "redis-sentinel://"):
		return openSentinel(raw)
	case !strings.Contains(raw, "://") && strings.Contains(raw, ","):
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(raw, ",")}), nil
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
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %s", redact(raw), scrub(err, u))
	}
	return redis.NewClient(opt), nil
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
