package store

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Clock is the one clock every replica of a deployment reads: Redis's
// TIME. Approval windows, draft expiry, reminders, escalations, timers
// and audit times all come from the service's clock, and with several
// replicas each on its own machine clock, one replica 90 s ahead expired
// the others' windows 89 s early and fired reminders at send (issue 20).
// Reading Redis on every call would cost a round trip per timestamp, so
// the clock measures the offset between Redis's TIME and the replica's own
// clock now and then, and answers from the replica's monotonic clock plus
// that offset: whatever the replica's own clock says, it reads Redis's
// time, to within half a round trip.
//
// It never goes backwards: a value below the last one handed out (a
// re-measurement that comes out a little lower, or a failover to a master
// whose clock is behind) is clamped to the last one, so the clock stands
// still until Redis's time catches up. Nothing then expires early and no
// reminder fires early; they are late by at most the step back. A step
// forward (a new master ahead) is taken as it comes, like any wall clock
// set forward: windows end that much sooner in real time, by the clock all
// replicas share. Both are logged when larger than ClockStepWarn. Keep the
// Redis nodes' clocks in sync (NTP) so that a failover moves nothing.
type Clock struct {
	rdb   redis.UniversalClient
	local func() time.Time
	log   *slog.Logger

	mu        sync.Mutex
	base      time.Time // Redis's time at the last measurement
	baseLocal time.Time // the local clock at that moment (with its monotonic reading)
	synced    bool
	lastSync  time.Time // local, when the last measurement was taken

	last atomic.Int64 // Unix ns of the latest value handed out

	dialed chan struct{} // a new connection was dialed: measure again
}

// Clock settings: how often the offset is measured again while nothing
// happens, how many TIME round trips one measurement takes (the one with
// the shortest round trip wins), the shortest spacing of measurements
// asked for by new connections, and the step that is logged.
const (
	ClockResync   = 15 * time.Second
	clockSamples  = 3
	clockMinGap   = 500 * time.Millisecond
	ClockStepWarn = time.Second
)

// NewClock reads Redis's time through rdb; local is this replica's own
// clock (time.Now; tests offset it). Call Sync before Now, and Run for as
// long as the clock is used. It hooks rdb to hear of new connections (a
// reconnect after an outage, a Sentinel failover to another master): each
// makes Run measure again.
func NewClock(rdb redis.UniversalClient, local func() time.Time, log *slog.Logger) *Clock {
	if local == nil {
		local = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Clock{rdb: rdb, local: local, log: log, dialed: make(chan struct{}, 1)}
	rdb.AddHook(dialHook{c.onDial})
	return c
}

// Now is Redis's time, read from the local monotonic clock plus the
// measured offset, never lower than a value it returned before. Before
// the first Sync it is the local clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	t := c.local()
	if c.synced {
		t = c.base.Add(t.Sub(c.baseLocal))
	}
	c.mu.Unlock()
	ns := t.UnixNano()
	for {
		last := c.last.Load()
		if ns <= last {
			return time.Unix(0, last)
		}
		if c.last.CompareAndSwap(last, ns) {
			return time.Unix(0, ns)
		}
	}
}

// Offset is how far Redis's time is ahead of the local clock (negative:
// behind), as last measured (metrics, logs).
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base.Sub(c.baseLocal)
}

// Sync measures the offset: a few TIME round trips, keeping the one with
// the shortest, whose reply is taken to be Redis's time at its midpoint.
// Returns unavailable when Redis does not answer (the old measurement then
// stays in use).
func (c *Clock) Sync(ctx context.Context) error {
	var best time.Duration = -1
	var at, redisAt time.Time
	for range clockSamples {
		l0 := c.local()
		rt, err := c.rdb.Time(ctx).Result()
		l1 := c.local()
		if err != nil {
			return unavailable("clock", fmt.Errorf("read TIME: %w", err))
		}
		if rtt := l1.Sub(l0); best < 0 || rtt < best {
			best, at, redisAt = rtt, l0.Add(rtt/2), rt
		}
	}
	c.mu.Lock()
	was, had := c.base.Add(at.Sub(c.baseLocal)), c.synced
	c.base, c.baseLocal, c.synced, c.lastSync = redisAt, at, true, c.local()
	c.mu.Unlock()
	if step := redisAt.Sub(was); had && (step > ClockStepWarn || step < -ClockStepWarn) {
		msg := "redis's clock stepped forward; windows and timers follow it"
		if step < 0 {
			msg = "redis's clock stepped back (a failover to a master that is behind?); the service clock stands still until it catches up"
		}
		c.log.Warn(msg, "step", step.Round(time.Millisecond).String())
	}
	return nil
}

// Run measures the offset again every ClockResync, and soon after a new
// connection to Redis is dialed (at most every clockMinGap), until ctx
// ends. A failed measurement is tried again a second later.
func (c *Clock) Run(ctx context.Context) {
	t := time.NewTimer(ClockResync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.dialed:
			c.mu.Lock()
			wait := clockMinGap - c.local().Sub(c.lastSync)
			c.mu.Unlock()
			if wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.Sync(sctx)
		cancel()
		next := ClockResync
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("measuring redis's clock failed; the last measurement stays in use", "err", err)
			}
			next = time.Second
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}

func (c *Clock) onDial() {
	select {
	case c.dialed <- struct{}{}:
	default:
	}
}

// dialHook tells the clock of every connection dialed.
type dialHook struct{ dialed func() }

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			h.dialed()
		}
		return conn, err
	}
}

func (h dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
