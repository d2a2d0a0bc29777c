package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// offsetClock is a replica's own clock, off by d (its monotonic reading
// kept, as a machine clock set wrong keeps ticking at the right rate).
func offsetClock(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// Replicas whose own clocks are 90 s apart read the same time: Redis's.
func TestClockReadsRedisTimeWhateverTheLocalOffset(t *testing.T) {
	srv := redistest.Start(t)
	var clocks []*store.Clock
	for _, off := range []time.Duration{-90 * time.Second, 0, 90 * time.Second} {
		c := store.NewClock(srv.Client(t), offsetClock(off), nil)
		if err := c.Sync(bg); err != nil {
			t.Fatal(err)
		}
		clocks = append(clocks, c)
	}
	rdb := srv.Client(t)
	for range 3 {
		l0 := time.Now()
		rt, err := rdb.Time(bg).Result()
		if err != nil {
			t.Fatal(err)
		}
		rtt := time.Since(l0)
		for i, c := range clocks {
			// The clock read right after TIME: at most the round trip (and
			// a little scheduling) after Redis's answer, never before it
			// by more than the measurement's own half round trip.
			if d := c.Now().Sub(rt); d < -50*time.Millisecond || d > rtt+50*time.Millisecond {
				t.Errorf("clock %d (local offset %s) is %s off Redis's TIME", i, []string{"-90s", "0", "+90s"}[i], d)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a, b := clocks[0].Now(), clocks[2].Now(); b.Sub(a) > 50*time.Millisecond || a.Sub(b) > 50*time.Millisecond {
		t.Errorf("replicas 180 s apart on their own clocks read %s and %s", a, b)
	}
}

// A failover to a master whose clock is behind does not move the service
// clock back: it stands still until Redis's time passes the last value
// handed out. A master ahead moves it forward at once.
func TestClockNeverGoesBackAfterAFailover(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	t0 := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	m.SetTime(t0)
	c := store.NewClock(rdb, nil, nil)
	if err := c.Sync(bg); err != nil {
		t.Fatal(err)
	}
	before := c.Now()
	if d := before.Sub(t0); d < 0 || d > 100*time.Millisecond {
		t.Fatalf("clock %s, Redis %s", before, t0)
	}
	m.SetTime(t0.Add(-10 * time.Second)) // the new master is 10 s behind
	if err := c.Sync(bg); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if now := c.Now(); now.Before(before) {
			t.Fatalf("the clock went back from %s to %s", before, now)
		} else {
			before = now
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := before.Sub(t0); d > 200*time.Millisecond {
		t.Errorf("the clock moved on %s while Redis was behind; it should stand still", d)
	}
	m.SetTime(t0.Add(time.Hour)) // ahead: taken at once
	if err := c.Sync(bg); err != nil {
		t.Fatal(err)
	}
	if d := c.Now().Sub(t0.Add(time.Hour)); d < 0 || d > 100*time.Millisecond {
		t.Errorf("after a step forward the clock is %s off Redis", d)
	}
}

// Run measures again when the client dials a new connection (Redis
// restarted, the network back, a Sentinel failover), without waiting for
// the periodic re-measurement.
func TestClockMeasuresAgainOnReconnect(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	t0 := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	m.SetTime(t0)
	c := store.NewClock(rdb, nil, nil)
	if err := c.Sync(bg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	time.Sleep(600 * time.Millisecond) // past the shortest spacing of measurements
	m.SetTime(t0.Add(time.Hour))
	m.Close() // every connection dropped
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	_ = rdb.Ping(bg).Err() // the first command after the drop fails; the next dials
	_ = rdb.Ping(bg).Err()
	deadline := time.Now().Add(3 * time.Second)
	for c.Now().Before(t0.Add(time.Hour)) {
		if time.Now().After(deadline) {
			t.Fatalf("3 s after the reconnect the clock still reads %s (Redis: %s); the resync waits for %s", c.Now(), t0.Add(time.Hour), store.ClockResync)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
