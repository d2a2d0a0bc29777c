package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ready reports whether the store takes writes now: a Redis that answers
// but refuses writes (out of memory under noeviction, MISCONF when it
// cannot persist, a read-only replica after a failover) is not ready,
// because no operation could move. That case is a *RefusingWrites, told
// apart from an unreachable Redis (an unavailable error).
func (r *Redis) Ready(ctx context.Context) error {
	host, _ := os.Hostname()
	err := r.rdb.Set(ctx, readyKey(host), "1", 10*time.Second).Err()
	if err == nil {
		return r.readyDurable(ctx)
	}
	var refused redis.Error
	if errors.As(err, &refused) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, redis.ErrClosed) {
		return &RefusingWrites{Class: errorClass(refused.Error()), Message: writeRefusal(err)}
	}
	return unavailable("ready", err)
}

// RefusingWrites is Ready's answer when Redis answers but refuses to
// write: /readyz reports it as "store": "refusing_writes" with the
// class of Redis's error (OOM, MISCONF, READONLY, …), not as unreachable.
type RefusingWrites struct {
	Class   string // the first word of Redis's error: OOM, MISCONF, READONLY, NOREPLICAS, …
	Message string // what it means, for logs
}

func (e *RefusingWrites) Error() string { return "redis refuses writes: " + e.Message }

// StoreState is the store's state as /readyz shows it.
func (e *RefusingWrites) StoreState() string { return "refusing_writes" }

// ErrorClass is the class of Redis's error.
func (e *RefusingWrites) ErrorClass() string { return e.Class }

// errorClass is the first word of a Redis error reply ("OOM command not
// allowed …" → "OOM"), if it is an upper-case code.
func errorClass(msg string) string {
	code, _, _ := strings.Cut(msg, " ")
	if code == "" || strings.ToUpper(code) != code || len(code) > 32 {
		return "ERR"
	}
	return code
}

func writeRefusal(err error) string {
	switch {
	case oom(err):
		return "it is out of memory (maxmemory with noeviction)"
	case strings.HasPrefix(err.Error(), "READONLY"):
		return "it is a read-only replica"
	case strings.HasPrefix(err.Error(), "MISCONF"):
		return "it cannot persist (an RDB snapshot or the AOF failed to write)"
	}
	return err.Error()
}

// Check is what a service outside development mode requires of its Redis
// at start: it must never evict keys (an evicted operation is a lost one),
// and it should persist them. It returns the warnings to log.
func (r *Redis) Check(ctx context.Context) (warnings []string, err error) {
	var nodes []*redis.Client
	switch c := r.rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex // ForEachMaster calls back concurrently
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			mu.Lock()
			nodes = append(nodes, n)
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, unavailable("check", err)
		}
	case *redis.Client:
		nodes = []*redis.Client{c}
	default:
		return nil, nil // a failover client: checked through INFO on the master below
	}
	for _, n := range nodes {
		// One section per call: not every server takes more.
		mem, err := n.Info(ctx, "memory").Result()
		pers, err2 := n.Info(ctx, "persistence").Result()
		var refused redis.Error
		if errors.As(err, &refused) || errors.As(err2, &refused) {
			// A server that does not report these (the embedded one, some
			// managed services) cannot be checked: say so.
			warnings = append(warnings, fmt.Sprintf("redis at %s does not report its eviction policy and persistence (%v); make sure it never evicts keys", n.Options().Addr, refused))
			continue
		}
		if err = errors.Join(err, err2); err != nil {
			return nil, unavailable("check", err)
		}
		policy, aof := infoField(mem, "maxmemory_policy"), infoField(pers, "aof_enabled")
		if policy != "" && policy != "noeviction" {
			return nil, fmt.Errorf("redis at %s has maxmemory-policy %s: countersign needs noeviction, or Redis may silently drop operations (CONFIG SET maxmemory-policy noeviction)", n.Options().Addr, policy)
		}
		if aof == "0" {
			warnings = append(warnings, fmt.Sprintf("redis at %s has AOF off: acknowledged operations are lost if it restarts (appendonly yes)", n.Options().Addr))
		}
		if w := listpackAdvice(ctx, n); w != "" {
			warnings = append(warnings, w)
		}
	}
	return warnings, nil
}

// CompactHashValue is the hash-max-listpack-value countersign asks of its
// Redis. An operation is one hash of about 17 fields; below this limit for
// its longest value (the packed input, about 880 bytes for 1 KiB of random
// text) Redis keeps it as one listpack, a few bytes per field, instead of
// a table of separately allocated entries, 50–70 bytes per field: about a
// quarter of a pending operation's memory (BENCHMARKS.md). Its fields are
// few, so reading one from a listpack stays cheap.
const CompactHashValue = 4096

// listpackAdvice says how to set CompactHashValue where the server is
// below it. A server that refuses CONFIG (managed services) is not advised.
func listpackAdvice(ctx context.Context, n *redis.Client) string {
	var v string
	for _, name := range []string{"hash-max-listpack-value", "hash-max-ziplist-value"} { // Redis 7, Redis 6
		if got, err := n.ConfigGet(ctx, name).Result(); err == nil && got[name] != "" {
			v = got[name]
			break
		}
	}
	if limit, err := strconv.Atoi(v); err != nil || limit >= CompactHashValue {
		return ""
	}
	return fmt.Sprintf("redis at %s has hash-max-listpack-value %s: operations take about a quarter more memory than with %d (CONFIG SET hash-max-listpack-value %d, and the same in redis.conf)",
		n.Options().Addr, v, CompactHashValue, CompactHashValue)
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
