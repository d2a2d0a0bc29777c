// Package store keeps operations in Redis: one hash and one event list per
// operation, sharded so that a principal's operations, quotas and work
// queue live in one Cluster slot; one Lua script per transition; a
// stream-based work queue per shard with timers; pub/sub for change
// wake-ups.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// Redis fills every port the domain declares (approval.Store is all of
// them) and the work queue.
var (
	_ approval.Store           = (*Redis)(nil)
	_ approval.OperationStore  = (*Redis)(nil)
	_ approval.StandingStore   = (*Redis)(nil)
	_ approval.TransitionStore = (*Redis)(nil)
	_ approval.ExecutionStore  = (*Redis)(nil)
	_ approval.AllowanceStore  = (*Redis)(nil)
	_ approval.LinkStore       = (*Redis)(nil)
	_ approval.DeliveryStore   = (*Redis)(nil)
	_ approval.LeaseStore      = (*Redis)(nil)
	_ approval.WakeStore       = (*Redis)(nil)
	_ approval.LiveStore       = (*Redis)(nil)
	_ approval.OperatorStore   = (*Redis)(nil)
	_ approval.Noter           = (*Redis)(nil)
	_ approval.PasskeyStore    = (*Redis)(nil)
	_ approval.CallbackStore   = (*Redis)(nil)
	_ approval.Queue           = (*Redis)(nil)
)

// Redis is approval.Store and approval.Queue on Redis.
type Redis struct {
	rdb    redis.UniversalClient
	log    *slog.Logger
	hub    *hub
	shards shards

	// ClaimIdle is how long a task may sit with a consumer that no longer
	// renews it (it died) before another consumer takes it over.
	ClaimIdle time.Duration
	// Block is how long a shard reader waits on an empty stream.
	Block time.Duration
	// Renew is how often a consumer renews the tasks it holds.
	Renew time.Duration
	// OnDecodeError is called for every stored operation that cannot be
	// read (metrics); the error is logged too.
	OnDecodeError func(key string)

	// dur is what every transition waits for (durable.go); epoch the
	// master's replication id last seen.
	dur     Durability
	epochMu sync.Mutex
	epoch   string

	groupMu sync.Mutex
	groupOK map[string]bool
	owners  owners // key → principal, for references by key alone
}

// New wraps a client with the default number of shards; Init pins the
// number for a deployment. The caller owns the client.
func New(rdb redis.UniversalClient, log *slog.Logger) *Redis {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Redis{rdb: rdb, log: log, shards: newShards(DefaultShards),
		ClaimIdle: 6 * time.Second, Block: time.Second, Renew: 2 * time.Second, groupOK: map[string]bool{}}
	r.hub = newHub(rdb, log)
	return r
}

// Init pins the number of shards: the first service to start on a store
// records it, and later ones must agree (0 takes what is recorded).
// Changing it would move principals' data to other shards.
func (r *Redis) Init(ctx context.Context, want int) error {
	n := want
	if n == 0 {
		n = DefaultShards
	}
	if n < 1 || n > 1024 {
		return fmt.Errorf("store: shards must be between 1 and 1024, not %d", want)
	}
	if err := r.rdb.HSetNX(ctx, metaKey, "shards", n).Err(); err != nil {
		return unavailable("init", err)
	}
	got, err := r.rdb.HGet(ctx, metaKey, "shards").Int()
	if err != nil {
		return unavailable("init", err)
	}
	if want != 0 && got != want {
		return fmt.Errorf("store: this Redis was set up with %d shards; the number is fixed for a deployment (configured: %d)", got, want)
	}
	r.shards = newShards(got)
	return nil
}

// Shards returns the number of shards.
func (r *Redis) Shards() int { return len(r.shards.tags) }

// Client returns the underlying client (for tests and operators).
func (r *Redis) Client() redis.UniversalClient { return r.rdb }

// Close stops the change subscription. It does not close the client.
func (r *Redis) Close() error { return r.hub.close() }

// unavailable turns a Redis failure into the coded error agents see.
func unavailable(op string, err error) error {
	if err == nil {
		return nil
	}
	var ae *approval.Error
	if errors.As(err, &ae) {
		return err
	}
	return &storeError{op: op, err: err}
}

// storeError is a Redis failure: shown as unavailable, logged with its cause.
type storeError struct {
	op  string
	err error
}

func (e *storeError) Error() string { return "store: " + e.op + ": " + e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// As lets errors.As(err, **approval.Error) see an unavailable error.
func (e *storeError) As(target any) bool {
	if t, ok := target.(**approval.Error); ok {
		*t = approval.Errorf(approval.CodeUnavailable, "the store is unreachable; try again shortly")
		return true
	}
	return false
}

// IsUnavailable reports whether err is a store failure (for logging).
func IsUnavailable(err error) bool {
	var se *storeError
	var ne net.Error
	return errors.As(err, &se) || errors.As(err, &ne)
}

// oom reports whether Redis refused a write for lack of memory.
func oom(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "OOM ") }

// Ping checks that Redis answers.
func (r *Redis) Ping(ctx context.Context) error {
	return unavailable("ping", r.rdb.Ping(ctx).Err())
}

// rateLimited is the rate_limited error with the wait until the window resets.
func rateLimited(what string, limit int, wait time.Duration) error {
	secs := int((wait+time.Second-1)/time.Second) + 0
	if secs < 1 {
		secs = 1
	}
	return approval.Errorf(approval.CodeRateLimited, "more than %d %s a minute; retry in %d s", limit, what, secs).
		WithDetails(map[string]any{"retry_after_seconds": secs})
}

func quotaExceeded(name, limit string) error {
	return approval.Errorf(approval.CodeQuotaExceeded, "quota %s (%s) is reached; end or finish some operations first", name, limit).
		WithDetails(map[string]any{"quota": name, "limit": atoiOr(limit)})
}

func atoiOr(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	return s
}

func notFound(key string) error {
	return approval.Errorf(approval.CodeNotFound, "no operation %s", key)
}
