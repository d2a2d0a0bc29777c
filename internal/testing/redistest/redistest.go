// Package redistest gives tests a Redis: the real server named by
// REDIS_URL (its database flushed before each test), or an embedded
// miniredis when REDIS_URL is unset. Tests using a real Redis must not run
// in parallel with each other; run packages with -p 1 against one database.
package redistest

import (
	"context"
	"os"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// Server is a Redis for one test.
type Server struct {
	// URL is a redis:// URL for the same database (for a second instance).
	URL string
	// Mini is the embedded server, or nil against a real Redis.
	Mini *miniredis.Miniredis
}

// Real reports whether tests run against a real Redis.
func Real() bool { return os.Getenv("REDIS_URL") != "" }

// Start returns a fresh, empty Redis for t.
func Start(t testing.TB) *Server {
	t.Helper()
	if u := os.Getenv("REDIS_URL"); u != "" {
		c := Client(t, u)
		if err := c.FlushDB(context.Background()).Err(); err != nil {
			t.Fatalf("redistest: flush %s: %v", u, err)
		}
		return &Server{URL: u}
	}
	m := miniredis.RunT(t)
	t.Cleanup(store.RealTimeTTL(m)) // keys expire in real time, as on a real server
	return &Server{URL: "redis://" + m.Addr(), Mini: m}
}

// Client opens a client on url, closed when t ends.
func Client(t testing.TB, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redistest: parse %s: %v", url, err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Client opens a new client on the server, closed when t ends.
func (s *Server) Client(t testing.TB) *redis.Client { return Client(t, s.URL) }
