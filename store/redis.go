// Package store keeps operations in Redis: one hash per operation plus a
// few companion keys sharing its hash tag, one Lua script per transition,
// a stream-based work queue with timers, and pub/sub for change wake-ups.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

var (
	_ approval.Store = (*Redis)(nil)
	_ approval.Queue = (*Redis)(nil)
)

// Redis is approval.Store and approval.Queue on Redis.
type Redis struct {
	rdb redis.UniversalClient
	log *slog.Logger
	hub *hub
	// ClaimIdle is how long a task may sit unacknowledged with a consumer
	// (crashed mid-work) before another consumer takes it over.
	ClaimIdle time.Duration
	// Block is how long Next waits on an empty queue before checking for
	// abandoned tasks again.
	Block time.Duration

	groupMu sync.Mutex
	groupOK bool
}

// New wraps a client. The caller owns the client.
func New(rdb redis.UniversalClient, log *slog.Logger) *Redis {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Redis{rdb: rdb, log: log, ClaimIdle: time.Minute, Block: 2 * time.Second}
	r.hub = newHub(rdb, log)
	return r
}

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

// Ping checks that Redis answers.
func (r *Redis) Ping(ctx context.Context) error {
	return unavailable("ping", r.rdb.Ping(ctx).Err())
}

func ms(t time.Time) string        { return strconv.FormatInt(t.UnixMilli(), 10) }
func msDur(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
func fromMS(s string) time.Time    { n, _ := strconv.ParseInt(s, 10, 64); return time.UnixMilli(n).UTC() }
func mustJSON(v any) string        { b, _ := json.Marshal(v); return string(b) }
func jsonOrEmpty[T any](v *T) string {
	if v == nil {
		return ""
	}
	return mustJSON(v)
}

// doc is the immutable part of an operation, stored as one JSON field.
type doc struct {
	Key            string                 `json:"k"`
	Action         string                 `json:"a"`
	Principal      string                 `json:"p"`
	OnBehalfOf     string                 `json:"b,omitempty"`
	Input          json.RawMessage        `json:"i"`
	PayloadHash    string                 `json:"h"`
	Preview        approval.Preview       `json:"v"`
	State          *approval.StateBinding `json:"s,omitempty"`
	Route          approval.Route         `json:"r"`
	IdempotencyKey string                 `json:"ik,omitempty"`
	Undoes         string                 `json:"u,omitempty"`
	CreatedAt      time.Time              `json:"c"`
}

// Create stores a new draft.
func (r *Redis) Create(ctx context.Context, op *approval.Operation, ev approval.Event, ttl time.Duration) error {
	d := doc{Key: op.Key, Action: op.Action, Principal: op.Principal, OnBehalfOf: op.OnBehalfOf, Input: op.Input,
		PayloadHash: op.PayloadHash, Preview: op.Preview, State: op.State, Route: op.Route,
		IdempotencyKey: op.IdempotencyKey, Undoes: op.Undoes, CreatedAt: op.CreatedAt}
	args := []any{op.Key, msDur(ttl), mustJSON(ev),
		"doc", mustJSON(d), "status", string(op.Status), "expires_at", ms(op.ExpiresAt),
		"created_at", ms(op.CreatedAt), "updated_at", ms(op.UpdatedAt), "version", 1,
		"payload_hash", op.PayloadHash, "principal", op.Principal}
	n, err := createScript.Run(ctx, r.rdb, opKeys(op.Key), args...).Int()
	if err != nil {
		return unavailable("create", err)
	}
	if n == 0 {
		return approval.ErrExists
	}
	// The index is a convenience for listing; entries whose operation is
	// gone are dropped when read.
	idx := principalOpsKey(op.Principal)
	pipe := r.rdb.Pipeline()
	pipe.ZAdd(ctx, idx, redis.Z{Score: float64(op.CreatedAt.UnixMilli()), Member: op.Key})
	pipe.Expire(ctx, idx, ttl+approval.DefaultRetention)
	if _, err := pipe.Exec(ctx); err != nil {
		r.log.Warn("index operation", "operation", op.Key, "err", err)
	}
	return nil
}

// BindIdempotency binds a principal's idempotency key once.
func (r *Redis) BindIdempotency(ctx context.Context, principal, key string, b approval.IdemBinding, ttl time.Duration) (approval.IdemBinding, bool, error) {
	k := idemKey(principal, key)
	ok, err := r.rdb.SetNX(ctx, k, mustJSON(b), ttl).Result()
	if err != nil {
		return b, false, unavailable("bind idempotency key", err)
	}
	if ok {
		return b, true, nil
	}
	raw, err := r.rdb.Get(ctx, k).Result()
	if errors.Is(err, redis.Nil) { // expired in between: bind again
		return r.BindIdempotency(ctx, principal, key, b, ttl)
	}
	if err != nil {
		return b, false, unavailable("read idempotency key", err)
	}
	var cur approval.IdemBinding
	if err := json.Unmarshal([]byte(raw), &cur); err != nil {
		return b, false, fmt.Errorf("store: decode idempotency binding: %w", err)
	}
	return cur, false, nil
}

// Get reads an operation and its companions in one consistent snapshot.
func (r *Redis) Get(ctx context.Context, key string) (*approval.Operation, error) {
	ops, err := r.getMany(ctx, []string{key})
	if err != nil {
		return nil, err
	}
	if ops[0] == nil {
		return nil, approval.Errorf(approval.CodeNotFound, "no operation %s", key)
	}
	return ops[0], nil
}

// getMany reads several operations; missing ones are nil.
func (r *Redis) getMany(ctx context.Context, keys []string) ([]*approval.Operation, error) {
	type cmds struct{ op, approvals, deliveries *redis.MapStringStringCmd }
	cs := make([]cmds, len(keys))
	// MULTI keeps each snapshot consistent; a cluster client runs one
	// transaction per slot, and each operation's keys share one.
	pipe := r.rdb.TxPipeline()
	for i, k := range keys {
		cs[i] = cmds{pipe.HGetAll(ctx, opKey(k)), pipe.HGetAll(ctx, approvalsKey(k)), pipe.HGetAll(ctx, deliveriesKey(k))}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("get", err)
	}
	out := make([]*approval.Operation, len(keys))
	for i := range keys {
		h, err := cs[i].op.Result()
		if err != nil {
			return nil, unavailable("get", err)
		}
		if len(h) == 0 {
			continue
		}
		op, err := decodeOp(h)
		if err != nil {
			return nil, err
		}
		a, _ := cs[i].approvals.Result()
		for _, v := range a {
			var d approval.Decision
			if json.Unmarshal([]byte(v), &d) == nil {
				op.Approvals = append(op.Approvals, d)
			}
		}
		sortBy(op.Approvals, func(d approval.Decision) time.Time { return d.At })
		dl, _ := cs[i].deliveries.Result()
		for _, v := range dl {
			var d approval.Delivery
			if json.Unmarshal([]byte(v), &d) == nil {
				op.Deliveries = append(op.Deliveries, d)
			}
		}
		sortBy(op.Deliveries, func(d approval.Delivery) time.Time { return d.At })
		out[i] = op
	}
	return out, nil
}

func decodeOp(h map[string]string) (*approval.Operation, error) {
	var d doc
	if err := json.Unmarshal([]byte(h["doc"]), &d); err != nil {
		return nil, fmt.Errorf("store: decode operation: %w", err)
	}
	op := &approval.Operation{
		Key: d.Key, Action: d.Action, Principal: d.Principal, OnBehalfOf: d.OnBehalfOf, Input: d.Input,
		PayloadHash: d.PayloadHash, Preview: d.Preview, State: d.State, Route: d.Route,
		IdempotencyKey: d.IdempotencyKey, Undoes: d.Undoes, CreatedAt: d.CreatedAt,
		Status: approval.Status(h["status"]), ExpiresAt: fromMS(h["expires_at"]), UpdatedAt: fromMS(h["updated_at"]),
		UndoneBy: h["undone_by"],
	}
	op.Version, _ = strconv.ParseInt(h["version"], 10, 64)
	if v := h["sent_at"]; v != "" {
		t := fromMS(v)
		op.SentAt = &t
	}
	if v := h["jobs"]; v != "" {
		_ = json.Unmarshal([]byte(v), &op.Jobs)
	}
	if v := h["rejection"]; v != "" {
		op.Rejection = new(approval.Decision)
		_ = json.Unmarshal([]byte(v), op.Rejection)
	}
	if v := h["result"]; v != "" {
		op.Result = json.RawMessage(v)
	}
	if v := h["error"]; v != "" {
		op.Error = new(approval.OpError)
		_ = json.Unmarshal([]byte(v), op.Error)
	}
	return op, nil
}

func sortBy[T any](s []T, at func(T) time.Time) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && at(s[j]).Before(at(s[j-1])); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// List returns the principal's operations, newest first.
func (r *Redis) List(ctx context.Context, principal string, limit int) ([]*approval.Operation, error) {
	idx := principalOpsKey(principal)
	keys, err := r.rdb.ZRevRange(ctx, idx, 0, int64(limit-1)).Result()
	if err != nil {
		return nil, unavailable("list", err)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	ops, err := r.getMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]*approval.Operation, 0, len(ops))
	for i, op := range ops {
		if op == nil {
			r.rdb.ZRem(ctx, idx, keys[i]) // gone after retention
			continue
		}
		out = append(out, op)
	}
	return out, nil
}

// Events returns the audit trail.
func (r *Redis) Events(ctx context.Context, key string) ([]approval.Event, error) {
	raw, err := r.rdb.LRange(ctx, eventsKey(key), 0, -1).Result()
	if err != nil {
		return nil, unavailable("events", err)
	}
	out := make([]approval.Event, 0, len(raw))
	for _, v := range raw {
		var e approval.Event
		if err := json.Unmarshal([]byte(v), &e); err != nil {
			return nil, fmt.Errorf("store: decode event: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Send moves a draft to pending_approval.
func (r *Redis) Send(ctx context.Context, key string, t approval.SendTransition) (approval.Status, error) {
	st, err := sendScript.Run(ctx, r.rdb, opKeys(key), key, ms(t.Now), ms(t.ExpiresAt),
		mustJSON(t.Jobs), mustJSON(t.Event), msDur(t.TTL)).Text()
	if err != nil {
		return "", unavailable("send", err)
	}
	if st == "" {
		return "", approval.Errorf(approval.CodeNotFound, "no operation %s", key)
	}
	return approval.Status(st), nil
}

// Decide records one decision.
func (r *Redis) Decide(ctx context.Context, key string, t approval.DecideTransition) (approval.DecideResult, error) {
	approve := "0"
	if t.Approve {
		approve = "1"
	}
	res, err := decideScript.Run(ctx, r.rdb, opKeys(key), key, ms(t.Now), t.Decision.Approver,
		mustJSON(t.Decision), approve, t.Required, t.NonceHash, t.Decision.PayloadHash,
		mustJSON(t.Event), mustJSON(t.QuorumEvent), mustJSON(t.ExpireEvent), msDur(t.Retention)).StringSlice()
	if err != nil {
		return approval.DecideResult{}, unavailable("decide", err)
	}
	if res[0] == "missing" {
		return approval.DecideResult{}, approval.Errorf(approval.CodeNotFound, "no operation %s", key)
	}
	return approval.DecideResult{Outcome: approval.DecideOutcome(res[0]), Status: approval.Status(res[1])}, nil
}

// Move performs any other transition.
func (r *Redis) Move(ctx context.Context, key string, t approval.MoveTransition) (approval.Status, bool, error) {
	from := make([]string, len(t.From))
	for i, s := range t.From {
		from[i] = string(s)
	}
	flags := ""
	if t.Unexpired {
		flags += "u"
	}
	if t.To == approval.StatusExpired {
		flags += "e"
	}
	var ttl int64
	if t.TTL > 0 {
		ttl = max(t.TTL.Milliseconds(), 1)
	}
	retention := t.TTL
	if retention <= 0 {
		retention = approval.DefaultRetention
	}
	res, err := moveScript.Run(ctx, r.rdb, opKeys(key), key, ms(t.Now), string(t.To), strings.Join(from, ","), flags,
		mustJSON(t.ExpireEvent), mustJSON(t.Event), ttl, string(t.Result), jsonOrEmpty(t.Error), msDur(retention)).Slice()
	if err != nil {
		return "", false, unavailable("move", err)
	}
	before, _ := res[0].(string)
	moved, _ := res[1].(int64)
	if before == "" {
		return "", false, approval.Errorf(approval.CodeNotFound, "no operation %s", key)
	}
	return approval.Status(before), moved == 1, nil
}

// AddCapability stores an issued link while the operation is pending.
func (r *Redis) AddCapability(ctx context.Context, key, nonceHash string, c approval.Capability, now time.Time) (bool, error) {
	n, err := addCapScript.Run(ctx, r.rdb, opKeys(key), key, nonceHash, mustJSON(c)).Int()
	if err != nil {
		return false, unavailable("add capability", err)
	}
	return n == 1, nil
}

// Capability reads a stored link record.
func (r *Redis) Capability(ctx context.Context, key, nonceHash string) (*approval.Capability, error) {
	raw, err := r.rdb.HGet(ctx, capsKey(key), nonceHash).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("capability", err)
	}
	var c approval.Capability
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, fmt.Errorf("store: decode capability: %w", err)
	}
	return &c, nil
}

// RecordDelivery records a delivered job once.
func (r *Redis) RecordDelivery(ctx context.Context, key string, d approval.Delivery, ev approval.Event) (bool, error) {
	n, err := deliveryScript.Run(ctx, r.rdb, opKeys(key), key, d.Job, mustJSON(d), mustJSON(ev), ms(d.At)).Int()
	if err != nil {
		return false, unavailable("record delivery", err)
	}
	return n == 1, nil
}

// MarkSynced records what a message shows.
func (r *Redis) MarkSynced(ctx context.Context, key, job string, s approval.Status) (bool, error) {
	n, err := syncedScript.Run(ctx, r.rdb, opKeys(key), key, job, string(s)).Int()
	if err != nil {
		return false, unavailable("mark synced", err)
	}
	return n == 1, nil
}

// Lease takes a short exclusive lease, or reports how long it still runs.
func (r *Redis) Lease(ctx context.Context, key, name string, ttl time.Duration) (bool, time.Duration, error) {
	k := leaseKey(key, name)
	ok, err := r.rdb.SetNX(ctx, k, "1", ttl).Result()
	if err != nil || ok {
		return ok, 0, unavailable("lease", err)
	}
	left, err := r.rdb.PTTL(ctx, k).Result()
	return false, max(left, 0), unavailable("lease", err)
}

// Unlease releases a lease.
func (r *Redis) Unlease(ctx context.Context, key, name string) error {
	return unavailable("unlease", r.rdb.Del(ctx, leaseKey(key, name)).Err())
}

// HoldLease sets a lease's expiry, taking it if free.
func (r *Redis) HoldLease(ctx context.Context, key, name string, ttl time.Duration) error {
	return unavailable("hold lease", r.rdb.Set(ctx, leaseKey(key, name), "1", ttl).Err())
}

// SetUndoneBy links an operation to its undo.
func (r *Redis) SetUndoneBy(ctx context.Context, key, prev, undo string) (bool, error) {
	n, err := undoneByScript.Run(ctx, r.rdb, opKeys(key), key, prev, undo, ms(time.Now())).Int()
	if err != nil {
		return false, unavailable("set undone_by", err)
	}
	return n == 1, nil
}

// Allow counts one attempt against a fixed-window limit shared by all
// replicas; it reports whether the attempt is within the limit and, if
// not, how long until the window resets.
func (r *Redis) Allow(ctx context.Context, bucket string, limit int, window time.Duration) (bool, time.Duration, error) {
	res, err := limitScript.Run(ctx, r.rdb, []string{limitKey(bucket)}, msDur(window)).Int64Slice()
	if err != nil {
		return false, 0, unavailable("limit", err)
	}
	return res[0] <= int64(limit), time.Duration(res[1]) * time.Millisecond, nil
}

// Count reads the current count of a limit without adding to it.
func (r *Redis) Count(ctx context.Context, bucket string) (int, time.Duration, error) {
	pipe := r.rdb.Pipeline()
	g := pipe.Get(ctx, limitKey(bucket))
	t := pipe.PTTL(ctx, limitKey(bucket))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, unavailable("limit", err)
	}
	n, _ := g.Int()
	return n, t.Val(), nil
}

// Once reports whether name is seen for the first time within ttl.
func (r *Redis) Once(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	ok, err := r.rdb.SetNX(ctx, onceKey(name), "1", ttl).Result()
	return ok, unavailable("once", err)
}

// IsUnavailable reports whether err is a store failure (for logging).
func IsUnavailable(err error) bool {
	var se *storeError
	var ne net.Error
	return errors.As(err, &se) || errors.As(err, &ne)
}

// All lists operations for operators, newest first: the principal's from
// its index, or every operation by scanning the keyspace (on every master
// of a cluster).
func (r *Redis) All(ctx context.Context, principal string, limit int) ([]*approval.Operation, error) {
	if principal != "" {
		return r.List(ctx, principal, limit)
	}
	var keys []string
	var mu sync.Mutex
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, prefix+"{op_*}:op", 500).Iterator()
		for it.Next(ctx) {
			k := strings.TrimSuffix(strings.TrimPrefix(it.Val(), prefix+"{"), "}:op")
			mu.Lock()
			keys = append(keys, k)
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	switch c := r.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		return nil, fmt.Errorf("store: cannot scan with %T", r.rdb)
	}
	if err != nil {
		return nil, unavailable("scan", err)
	}
	ops, err := r.getMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]*approval.Operation, 0, len(ops))
	for _, op := range ops {
		if op != nil {
			out = append(out, op)
		}
	}
	slices.SortFunc(out, func(a, b *approval.Operation) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
