package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/redis/go-redis/v9"
)

// storeOverhead is what an operation costs beyond its fields' bytes (keys,
// indexes, events and deliveries to come), counted against the principal's
// max_stored_bytes. The input counts as the agent sent it, before
// compression (compact.go): a quota then means the same whatever the text,
// and text made to compress well buys no more room.
const storeOverhead = 1024

// run executes an operation script with the shared KEYS and ARGV prefix.
func (r *Redis) run(ctx context.Context, s *redis.Script, ref approval.Ref, tx string, now time.Time, args ...any) *redis.Cmd {
	tag := r.shards.of(ref.Principal)
	argv := append([]any{ref.Key, ref.Principal, tx, ms(now)}, args...)
	return r.runDurable(ctx, "transition", s, tag, opKeys(tag, ref.Principal, ref.Key), argv...)
}

// reply reads a script's {word, …} reply.
func reply(cmd *redis.Cmd) ([]string, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		switch x := v.(type) {
		case string:
			out[i] = x
		case int64:
			out[i] = strconv.FormatInt(x, 10)
		}
	}
	return out, nil
}

// Create stores a new draft with its quotas, rate limit and idempotency
// binding in one round trip.
func (r *Redis) Create(ctx context.Context, op *approval.Operation, t approval.CreateTransition) error {
	tag := r.shards.of(op.Principal)
	ik := ""
	if op.IdempotencyKey != "" {
		ik = idemKey(tag, op.Principal, op.IdempotencyKey)
	}
	d, pv, ev, in := encodeDoc(op), r.storedPreview(op), encodeEvent(t.Event, op.PayloadHash), pack(string(op.Input))
	size := int64(len(d)+len(op.Input)+len(pv)+len(ev)) + storeOverhead
	if t.MaxBytes > 0 && size > t.MaxBytes {
		return approval.FieldErrors{{Field: "input", Reason: fmt.Sprintf(
			"the prepared operation would take %d bytes to keep; a request of this size may take at most %d", size, t.MaxBytes)}}.Err()
	}
	q := t.Quotas
	res, err := reply(r.run(ctx, createScript, op.Ref(), t.Tx, t.Now, msArg(t.TTL), ms(op.ExpiresAt),
		q.RequestsPerMinute, q.MaxDrafts, q.MaxStoredBytes, size, ik, op.PayloadHash, ev, d, in, pv))
	if err != nil {
		return unavailable("create", err)
	}
	switch res[0] {
	case "created":
		r.owners.put(op.Key, op.Principal)
		return nil
	case "rate":
		wait, _ := strconv.Atoi(res[1])
		return rateLimited("requests", q.RequestsPerMinute, time.Duration(wait)*time.Millisecond)
	case "bound":
		return &approval.Bound{Operation: res[1], PayloadHash: res[2]}
	case "quota":
		return quotaExceeded(res[1], res[2])
	case "exists":
		return approval.ErrExists
	}
	return fmt.Errorf("store: create: unexpected reply %q", res[0])
}

// storedPreview is the pv field of op: empty when it has no preview (the
// service leaves out a preview its action renders again from the input,
// and renders it back on reads).
func (r *Redis) storedPreview(op *approval.Operation) string {
	if len(op.Preview.Fields) == 0 && op.Preview.Title == "" {
		return ""
	}
	return pack(mustJSON(op.Preview))
}

// Get reads an operation in one round trip.
func (r *Redis) Get(ctx context.Context, ref approval.Ref) (*approval.Operation, error) {
	ref, h, err := r.getHash(ctx, ref)
	if err != nil {
		return nil, err
	}
	return r.decode(ref.Key, h)
}

// getHash reads an operation's hash, locating it first if ref has no
// principal.
func (r *Redis) getHash(ctx context.Context, ref approval.Ref) (approval.Ref, map[string]string, error) {
	ref, err := r.locate(ctx, ref)
	if err != nil {
		return ref, nil, err
	}
	tag := r.shards.of(ref.Principal)
	var cmd *redis.MapStringStringCmd
	if err := r.readDurable(ctx, "get", tag, func(p redis.Pipeliner) { cmd = p.HGetAll(ctx, opKey(tag, ref.Key)) }); err != nil {
		return ref, nil, err
	}
	h, err := cmd.Result()
	if err != nil {
		return ref, nil, unavailable("get", err)
	}
	return ref, h, nil
}

// Read is Get counted against the principal's request rate, in one round
// trip. When Redis refuses writes (out of memory), the read still works,
// uncounted: reads must keep working while writes cannot.
func (r *Redis) Read(ctx context.Context, ref approval.Ref, perMinute int) (*approval.Operation, error) {
	ref, h, err := r.readHash(ctx, ref, perMinute)
	if err != nil {
		return nil, err
	}
	return r.decode(ref.Key, h)
}

// ReadStanding is Read that decodes only where the operation stands;
// full decodes all of it from the same reply. A long-poll needs no more
// until the operation changes.
func (r *Redis) ReadStanding(ctx context.Context, ref approval.Ref, perMinute int) (approval.Standing, func() (*approval.Operation, error), error) {
	ref, h, err := r.readHash(ctx, ref, perMinute)
	if err != nil {
		return approval.Standing{}, nil, err
	}
	if len(h) == 0 {
		return approval.Standing{}, nil, notFound(ref.Key)
	}
	v, _ := strconv.ParseInt(h["v"], 10, 64)
	st := approval.Standing{Principal: cmp.Or(h["p"], principalOf(h["d"])), Status: approval.Status(h["st"]), Version: v, ExpiresAt: fromMS(h["x"])}
	return st, func() (*approval.Operation, error) { return r.decode(ref.Key, h) }, nil
}

// readHash is Read's round trip: the operation's hash, the request
// counted.
func (r *Redis) readHash(ctx context.Context, ref approval.Ref, perMinute int) (approval.Ref, map[string]string, error) {
	if perMinute <= 0 || ref.Principal == "" {
		return r.getHash(ctx, ref)
	}
	tag := r.shards.of(ref.Principal)
	// Durable like a transition: what the agent is shown must be on the
	// replicas, or a failover could show it an earlier status next
	// (SPEC §2: nothing returns to an earlier state).
	vals, err := r.runDurable(ctx, "read", readScript, tag, []string{opKey(tag, ref.Key), countersKey(tag, ref.Principal)},
		perMinute).Slice()
	if oom(err) {
		return r.getHash(ctx, ref)
	}
	if err != nil {
		return ref, nil, unavailable("read", err)
	}
	if wait, _ := vals[0].(int64); wait > 0 {
		return ref, nil, rateLimited("requests", perMinute, time.Duration(wait)*time.Millisecond)
	}
	return ref, flat(vals[1]), nil
}

// Rate counts one request of a principal.
func (r *Redis) Rate(ctx context.Context, principal string, perMinute int) error {
	if perMinute <= 0 {
		return nil
	}
	wait, err := rateScript.Run(ctx, r.rdb, []string{countersKey(r.shards.of(principal), principal)},
		perMinute).Int64()
	if oom(err) {
		return nil // counting is a write; reads must work while Redis refuses writes
	}
	if err != nil {
		return unavailable("rate", err)
	}
	if wait > 0 {
		return rateLimited("requests", perMinute, time.Duration(wait)*time.Millisecond)
	}
	return nil
}

func (r *Redis) decode(key string, h map[string]string) (*approval.Operation, error) {
	if len(h) == 0 {
		return nil, notFound(key)
	}
	op, err := decodeOp(key, h)
	if err != nil {
		r.decodeFailed(err)
		return nil, err
	}
	return op, nil
}

// decodeFailed reports a stored record that cannot be read: logged with
// its key and field, never its content, and counted (OnDecodeError).
// Reads that list many operations skip it after this; reads of the one
// operation return the error.
func (r *Redis) decodeFailed(err error) {
	var de *DecodeError
	if !errors.As(err, &de) {
		de = &DecodeError{Err: err}
	}
	r.log.Error("stored operation is unreadable", "operation", de.Key, "field", de.Field, "reason", decodeReason(de.Err))
	if r.OnDecodeError != nil {
		r.OnDecodeError(de.Key)
	}
}

// locate fills in the principal of a Ref given by key alone: it asks every
// shard at once whether it holds the key.
func (r *Redis) locate(ctx context.Context, ref approval.Ref) (approval.Ref, error) {
	if ref.Principal != "" {
		return ref, nil
	}
	if p := r.owners.get(ref.Key); p != "" {
		return approval.Ref{Principal: p, Key: ref.Key}, nil
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(r.shards.tags))
	for i, tag := range r.shards.tags {
		cmds[i] = pipe.HMGet(ctx, opKey(tag, ref.Key), "d", "p")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return ref, unavailable("locate", err)
	}
	for _, c := range cmds {
		vals, err := c.Result()
		if err != nil || len(vals) != 2 {
			continue
		}
		d, _ := vals[0].(string)
		p, _ := vals[1].(string) // stored before the doc held it
		if d != "" && p == "" {
			p = principalOf(d)
		}
		if p != "" {
			r.owners.put(ref.Key, p)
			return approval.Ref{Principal: p, Key: ref.Key}, nil
		}
	}
	return ref, notFound(ref.Key)
}

// getMany reads several operations in one round trip; missing ones are
// nil, and so are unreadable ones, which decode reported and which
// unreadable lists.
func (r *Redis) getMany(ctx context.Context, refs []approval.Ref) (ops []*approval.Operation, unreadable map[int]bool, err error) {
	cmds := make([]*redis.MapStringStringCmd, len(refs))
	queue := func(pipe redis.Pipeliner) {
		for i, ref := range refs {
			cmds[i] = pipe.HGetAll(ctx, opKey(r.shards.of(ref.Principal), ref.Key))
		}
	}
	if tag, one := r.oneTag(refs); one {
		// One principal's operations (a list): read where transitions
		// are durable, like Get.
		if err := r.readDurable(ctx, "get", tag, queue); err != nil {
			return nil, nil, err
		}
	} else {
		pipe := r.rdb.Pipeline()
		queue(pipe)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, unavailable("get", err)
		}
	}
	out := make([]*approval.Operation, len(refs))
	for i, c := range cmds {
		h, err := c.Result()
		if err != nil {
			return nil, nil, unavailable("get", err)
		}
		if len(h) == 0 {
			continue
		}
		if out[i], err = r.decode(refs[i].Key, h); err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				return nil, nil, err
			}
			// Reported (logged and counted) by decode: one unreadable
			// operation must not make every list of its principal, the
			// inbox or the stuck scan fail.
			out[i] = nil
			if unreadable == nil {
				unreadable = map[int]bool{}
			}
			unreadable[i] = true
		}
	}
	return out, unreadable, nil
}

// oneTag returns the shard of refs when they all share one.
func (r *Redis) oneTag(refs []approval.Ref) (string, bool) {
	if len(refs) == 0 {
		return "", false
	}
	tag := r.shards.of(refs[0].Principal)
	for _, ref := range refs[1:] {
		if r.shards.of(ref.Principal) != tag {
			return "", false
		}
	}
	return tag, true
}

// List returns the principal's operations, newest first, from its index.
func (r *Redis) List(ctx context.Context, principal string, limit int) ([]*approval.Operation, error) {
	idx := indexKey(r.shards.of(principal), principal)
	keys, err := r.rdb.ZRevRange(ctx, idx, 0, int64(limit-1)).Result()
	if err != nil {
		return nil, unavailable("list", err)
	}
	refs := make([]approval.Ref, len(keys))
	for i, k := range keys {
		refs[i] = approval.Ref{Principal: principal, Key: k}
	}
	ops, unreadable, err := r.getMany(ctx, refs)
	if err != nil {
		return nil, err
	}
	out := make([]*approval.Operation, 0, len(ops))
	var gone []any
	for i, op := range ops {
		if op == nil {
			if !unreadable[i] { // an unreadable one stays listed for its repair
				gone = append(gone, keys[i])
			}
			continue
		}
		out = append(out, op)
	}
	if len(gone) > 0 { // deleted after retention
		r.rdb.ZRem(ctx, idx, gone...)
	}
	return out, nil
}

// All lists the operations of the given principals, newest first, at most
// limit of them (for operators).
func (r *Redis) All(ctx context.Context, principals []string, limit int) ([]*approval.Operation, error) {
	var out []*approval.Operation
	for _, p := range principals {
		ops, err := r.List(ctx, p, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, ops...)
	}
	slices.SortFunc(out, func(a, b *approval.Operation) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(a.Key, b.Key))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Executing lists operations claimed before the given time and still
// executing, from every shard's executing index, oldest first.
func (r *Redis) Executing(ctx context.Context, before time.Time, limit int) ([]*approval.Operation, error) {
	ops, err := r.fromEveryShard(ctx, "executing", func(pipe redis.Pipeliner, tag string) *redis.StringSliceCmd {
		return pipe.ZRangeByScore(ctx, executingKey(tag), &redis.ZRangeBy{
			Min: "-inf", Max: strconv.FormatInt(ms(before), 10), Count: int64(limit)})
	})
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(ops, func(op *approval.Operation) bool {
		return op == nil || op.Status != approval.StatusExecuting
	})
	slices.SortFunc(out, func(a, b *approval.Operation) int {
		return cmp.Or(a.ClaimedAt.Compare(*b.ClaimedAt), strings.Compare(a.Key, b.Key))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Events returns the audit trail.
func (r *Redis) Events(ctx context.Context, ref approval.Ref) ([]approval.Event, error) {
	ref, err := r.locate(ctx, ref)
	if err != nil {
		return nil, err
	}
	tag := r.shards.of(ref.Principal)
	pipe := r.rdb.Pipeline()
	list := pipe.LRange(ctx, eventsKey(tag, ref.Key), 0, -1) // where operations stored before kept them
	fields := pipe.HMGet(ctx, opKey(tag, ref.Key), "ph", "ev")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("events", err)
	}
	ph, _ := fields.Val()[0].(string)
	raw := list.Val()
	if trail, _ := fields.Val()[1].(string); trail != "" {
		raw = append(raw, strings.Split(trail, "\n")...)
	}
	out := make([]approval.Event, 0, len(raw))
	for _, v := range raw {
		e, err := decodeEvent(v, ref.Key, ph)
		if err != nil {
			err = &DecodeError{Key: ref.Key, Field: "events", Err: err}
			r.decodeFailed(err)
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Send moves a draft to pending_approval and wakes the workers.
func (r *Redis) Send(ctx context.Context, ref approval.Ref, t approval.SendTransition) (approval.Status, *approval.Operation, error) {
	args := []any{ms(t.ExpiresAt), encodeJobs(t.Jobs),
		encodeEvent(t.Event, t.Event.PayloadHash), msArg(t.TTL), t.Quotas.MaxPending, t.Quotas.SendsPerMinute,
		encodeEvent(t.ExpireEvent, t.ExpireEvent.PayloadHash), msArg(t.DraftRetention), t.Quotas.RequestsPerMinute}
	if sp := t.Spend; sp != nil && len(t.AllowedEvents) == 2 {
		by := approval.Decision{Approver: "allowance:" + sp.Allowance, Via: "allowance", At: t.Now, PayloadHash: t.Event.PayloadHash, Tx: t.Tx}
		args = append(args, sp.Allowance, strconv.FormatFloat(sp.Amount, 'f', -1, 64), encodeDecision(by),
			encodeEvent(t.AllowedEvents[0], t.Event.PayloadHash), encodeEvent(t.AllowedEvents[1], t.Event.PayloadHash))
	} else {
		args = append(args, "", "0", "", "", "")
	}
	for _, tm := range t.Timers {
		args = append(args, tm.Reason, ms(tm.At))
	}
	cmd := r.run(ctx, sendScript, ref, t.Tx, t.Now, args...)
	res, err := reply(cmd)
	if err != nil {
		return "", nil, unavailable("send", err)
	}
	// after is the operation as the script left it; one that does not
	// decode is left for the caller's own read to report.
	after := func(i int) *approval.Operation {
		vals, _ := cmd.Slice()
		if len(vals) <= i {
			return nil
		}
		h := flat(vals[i])
		if len(h) == 0 {
			return nil
		}
		op, err := r.decode(ref.Key, h)
		if err != nil {
			return nil
		}
		return op
	}
	switch res[0] {
	case "sent":
		return approval.StatusDraft, after(1), nil
	case "status":
		return approval.Status(res[1]), after(2), nil
	case "rate":
		wait, _ := strconv.Atoi(res[1])
		return "", nil, rateLimited("sends", t.Quotas.SendsPerMinute, time.Duration(wait)*time.Millisecond)
	case "quota":
		return "", nil, quotaExceeded(res[1], res[2])
	}
	return "", nil, notFound(ref.Key)
}

// Decide records one decision.
func (r *Redis) Decide(ctx context.Context, ref approval.Ref, t approval.DecideTransition) (approval.DecideResult, error) {
	approve := "0"
	if t.Approve {
		approve = "1"
	}
	t.Decision.Tx = t.Tx
	cmd := r.run(ctx, decideScript, ref, t.Tx, t.Now, t.Decision.Approver, encodeDecision(t.Decision),
		approve, t.Required, t.NonceHash, t.Decision.PayloadHash, encodeEvent(t.Event, t.Decision.PayloadHash),
		encodeEvent(t.QuorumEvent, t.QuorumEvent.PayloadHash), encodeEvent(t.ExpireEvent, t.ExpireEvent.PayloadHash),
		msArg(t.Retention))
	res, err := reply(cmd)
	if err != nil {
		return approval.DecideResult{}, unavailable("decide", err)
	}
	if res[0] == "missing" {
		return approval.DecideResult{}, notFound(ref.Key)
	}
	out := approval.DecideResult{Outcome: approval.DecideOutcome(res[0]), Status: approval.Status(res[1])}
	// The script answers with the operation as it left it; one that does
	// not decode is left for the caller's own read to report.
	if vals, _ := cmd.Slice(); len(vals) > 2 {
		if h := flat(vals[2]); len(h) > 0 {
			if op, err := r.decode(ref.Key, h); err == nil {
				out.Operation = op
			}
		}
	}
	return out, nil
}

// Claim moves approved → executing for the token's holder. Where
// transitions are durable (durable.go), it is refused first on a master
// that cannot keep it (unavailable; the operation stays approved), and it
// returns unavailable with outcome_unknown when the replicas did not
// acknowledge it: the caller then asks again with the same token and
// starts no effect until Claim answers won.
func (r *Redis) Claim(ctx context.Context, ref approval.Ref, t approval.ClaimTransition) (bool, approval.Status, error) {
	if err := r.guard(ctx, r.shards.of(ref.Principal)); err != nil {
		return false, "", err
	}
	res, err := reply(r.run(ctx, claimScript, ref, t.Tx, t.Now, t.Token, encodeEvent(t.Event, t.Event.PayloadHash),
		encodeEvent(t.ExpireEvent, t.ExpireEvent.PayloadHash), msArg(t.Retention), t.Lease.Milliseconds()))
	if err != nil {
		return false, "", unavailable("claim", err)
	}
	switch res[0] {
	case "won":
		return true, approval.StatusExecuting, nil
	case "lost":
		return false, approval.Status(res[1]), nil
	case "expired":
		return false, approval.StatusExpired, nil
	}
	return false, "", notFound(ref.Key)
}

// Finish records the claimer's outcome, or its late outcome when an
// operator settled the operation first.
func (r *Redis) Finish(ctx context.Context, ref approval.Ref, t approval.FinishTransition) (bool, error) {
	late, lateEv := "", ""
	if t.Late != nil {
		b, err := json.Marshal(t.Late)
		if err != nil {
			return false, fmt.Errorf("store: finish %s: encode late outcome: %w", ref.Key, err)
		}
		late, lateEv = string(b), encodeEvent(t.LateEvent, t.LateEvent.PayloadHash)
	}
	res, err := reply(r.run(ctx, finishScript, ref, t.Tx, t.Now, t.Token, string(t.To), string(t.Result),
		jsonOrEmpty(t.Error), encodeEvent(t.Event, t.Event.PayloadHash), msArg(t.Retention), late, lateEv))
	if err != nil {
		return false, unavailable("finish", err)
	}
	switch res[0] {
	case "done":
		return false, nil
	case "late":
		return true, nil
	case "not_claimer":
		return false, approval.Errorf(approval.CodeInvalidState, "operation %s is %s and not held by this claim", ref.Key, res[1])
	}
	return false, notFound(ref.Key)
}

// Fence re-checks a claim right before an effect and renews its lease.
func (r *Redis) Fence(ctx context.Context, ref approval.Ref, token string, ttl time.Duration) (approval.FenceResult, approval.Status, error) {
	res, err := reply(r.run(ctx, fenceScript, ref, "", time.Time{}, token, msArg(ttl)))
	if err != nil {
		return approval.FenceLost, "", unavailable("fence", err)
	}
	switch res[0] {
	case "held":
		return approval.FenceHeld, approval.StatusExecuting, nil
	case "lost":
		return approval.FenceLost, approval.Status(res[1]), nil
	case "expired":
		return approval.FenceExpired, approval.StatusExecuting, nil
	}
	return approval.FenceLost, "", notFound(ref.Key)
}

// Settle records an operator's outcome for an executing operation.
// Returns invalid_state (details.lease_remaining_seconds) when it says
// what happened while the claimer's lease is live.
func (r *Redis) Settle(ctx context.Context, ref approval.Ref, t approval.SettleTransition) (approval.Status, bool, error) {
	mode := ""
	if t.Unknown {
		mode = "unknown"
	}
	res, err := reply(r.run(ctx, settleScript, ref, t.Tx, t.Now, string(t.To), jsonOrEmpty(t.Error),
		encodeEvent(t.Event, t.Event.PayloadHash), msArg(t.Retention), mode))
	if err == nil && len(res) > 2 && res[0] == "leased" {
		left, _ := strconv.ParseInt(res[2], 10, 64)
		secs := (left + 999) / 1000
		return approval.StatusExecuting, false, approval.Errorf(approval.CodeInvalidState,
			"operation %s is still held by its executor, whose lease runs %d s more: it may still be writing. "+
				"Settle it as unknown now, or as succeeded or failed once the lease has run out", ref.Key, secs).
			WithDetails(map[string]any{"lease_remaining_seconds": secs, "status": "executing"})
	}
	return moved(ref, "settle", res, err, "done", approval.StatusExecuting)
}

// Cancel ends a draft or pending operation.
func (r *Redis) Cancel(ctx context.Context, ref approval.Ref, t approval.Step) (approval.Status, bool, error) {
	res, err := reply(r.run(ctx, cancelScript, ref, t.Tx, t.Now, encodeEvent(t.Event, t.Event.PayloadHash),
		msArg(t.Retention), msArg(t.DraftRetention)))
	return moved(ref, "cancel", res, err, "canceled", "")
}

// Expire ends an operation found past its window.
func (r *Redis) Expire(ctx context.Context, ref approval.Ref, t approval.Step) (approval.Status, bool, error) {
	res, err := reply(r.run(ctx, expireScript, ref, t.Tx, t.Now, encodeEvent(t.Event, t.Event.PayloadHash),
		msArg(t.Retention), msArg(t.DraftRetention)))
	return moved(ref, "expire", res, err, "expired", "")
}

// Stale fails a pending operation whose target changed.
func (r *Redis) Stale(ctx context.Context, ref approval.Ref, t approval.StaleTransition) (approval.Status, bool, error) {
	res, err := reply(r.run(ctx, staleScript, ref, t.Tx, t.Now, jsonOrEmpty(t.Error),
		encodeEvent(t.Event, t.Event.PayloadHash), msArg(t.Retention)))
	return moved(ref, "stale", res, err, "failed", approval.StatusPending)
}

// moved reads the reply of a script answering {word, status before} when it
// moved (before is fixed when the script has only one from-status) and
// {'status', current} when it did not.
func moved(ref approval.Ref, op string, res []string, err error, word string, before approval.Status) (approval.Status, bool, error) {
	if err != nil {
		return "", false, unavailable(op, err)
	}
	switch res[0] {
	case word, "done":
		if len(res) > 1 && res[1] != "" {
			before = approval.Status(res[1])
		}
		return before, true, nil
	case "status":
		return approval.Status(res[1]), false, nil
	}
	return "", false, notFound(ref.Key)
}

// SweepExpired expires every shard's operations past their window.
func (r *Redis) SweepExpired(ctx context.Context, now time.Time, t approval.SweepTransition) ([]approval.Event, error) {
	const batch = 200
	t.Event.Time = now.UTC()
	ev := encodeEvent(t.Event, t.Event.PayloadHash)
	var out []approval.Event
	for _, tag := range r.shards.tags {
		for {
			pairs, err := r.runDurable(ctx, "sweep", sweepScript, tag, []string{dueKey(tag), streamKey(tag), goneKey(tag), auditKey(tag)},
				ms(now), batch, msArg(t.Retention), msArg(t.DraftRetention), ev).StringSlice()
			if err != nil && !errors.Is(err, redis.Nil) {
				return out, unavailable("sweep", err)
			}
			for i := 0; i+4 < len(pairs); i += 5 {
				e := t.Event
				e.Operation, e.PayloadHash, e.Action = pairs[i], pairs[i+1], pairs[i+2]
				e.Principal, e.From = pairs[i+3], approval.Status(pairs[i+4])
				out = append(out, e)
			}
			if len(pairs)/5 < batch {
				break
			}
		}
	}
	return out, nil
}

// Supersede replaces a pending operation by an approver's new version.
func (r *Redis) Supersede(ctx context.Context, ref approval.Ref, t approval.SupersedeTransition) (bool, error) {
	n := t.Next
	tag := r.shards.of(ref.Principal)
	d, in, pv := encodeDoc(n), pack(string(n.Input)), r.storedPreview(n)
	prepared, sent := encodeEvent(t.Prepared, n.PayloadHash), encodeEvent(t.Sent, n.PayloadHash)
	size := int64(len(d)+len(n.Input)+len(pv)+len(prepared)+len(sent)) + storeOverhead
	dec, aev, qev := "", "", ""
	if t.Approval != nil {
		t.Approval.Tx = t.Tx
		dec, aev, qev = encodeDecision(*t.Approval), encodeEvent(t.ApprovalEvent, n.PayloadHash), encodeEvent(t.QuorumEvent, n.PayloadHash)
	}
	args := []any{n.Key, t.Editor, strings.Join(t.Changed, ","), encodeEvent(t.Event, t.Event.PayloadHash), msArg(t.Retention),
		d, in, pv, n.PayloadHash, ms(n.ExpiresAt), msArg(t.TTL), size, encodeJobs(t.Jobs),
		prepared, sent, dec, aev, qev, n.Route.Required}
	for _, tm := range t.Timers {
		args = append(args, tm.Reason, ms(tm.At))
	}
	keys := append(opKeys(tag, ref.Principal, ref.Key), opKey(tag, n.Key))
	res, err := reply(r.runDurable(ctx, "supersede", supersedeScript, tag, keys, append([]any{ref.Key, ref.Principal, t.Tx, ms(t.Now)}, args...)...))
	if err != nil {
		return false, unavailable("supersede", err)
	}
	if res[0] == "missing" {
		return false, notFound(ref.Key)
	}
	if res[0] == "superseded" {
		r.owners.put(n.Key, ref.Principal)
	}
	return res[0] == "superseded", nil
}

// Escalate adds approvers to a pending operation once.
func (r *Redis) Escalate(ctx context.Context, ref approval.Ref, t approval.EscalateTransition) (bool, error) {
	args := []any{mustJSON(escalated{At: ms(t.Escalated.At), Approvers: t.Escalated.Approvers}), encodeEvent(t.Event, t.Event.PayloadHash)}
	for _, j := range t.Jobs {
		args = append(args, j.ID, encodeJob(j))
	}
	res, err := reply(r.run(ctx, escalateScript, ref, t.Tx, t.Now, args...))
	if err != nil {
		return false, unavailable("escalate", err)
	}
	if res[0] == "missing" {
		return false, notFound(ref.Key)
	}
	return res[0] == "escalated", nil
}

// Remind records a reminder once.
func (r *Redis) Remind(ctx context.Context, ref approval.Ref, t approval.RemindTransition) (bool, error) {
	args := []any{t.N, encodeEvent(t.Event, t.Event.PayloadHash)}
	for _, j := range t.Jobs {
		args = append(args, j.ID, encodeJob(j))
	}
	res, err := reply(r.run(ctx, remindScript, ref, t.Tx, t.Now, args...))
	if err != nil {
		return false, unavailable("remind", err)
	}
	if res[0] == "missing" {
		return false, notFound(ref.Key)
	}
	return res[0] == "reminded", nil
}

// AddCapability stores an issued link while the operation is pending.
func (r *Redis) AddCapability(ctx context.Context, ref approval.Ref, nonceHash string, c approval.Capability, now time.Time) (bool, error) {
	n, err := r.run(ctx, capabilityScript, ref, "", now, nonceHash,
		mustJSON(capability{Approver: c.Approver, Channel: c.Channel, Expires: c.Expires.Unix()}), c.Approver, c.Channel).Int()
	if err != nil {
		return false, unavailable("add capability", err)
	}
	return n == 1, nil
}

// Capability reads a stored link record.
func (r *Redis) Capability(ctx context.Context, ref approval.Ref, nonceHash string) (*approval.Capability, error) {
	raw, err := r.rdb.HGet(ctx, opKey(r.shards.of(ref.Principal), ref.Key), "c:"+nonceHash).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("capability", err)
	}
	return r.decodeCapability(ref.Key, nonceHash, raw)
}

// GetLink reads an operation and its link record for nonceHash (nil when
// there is none) in one round trip: the record is a field of the
// operation's hash, which Get reads whole anyway.
func (r *Redis) GetLink(ctx context.Context, ref approval.Ref, nonceHash string) (*approval.Operation, *approval.Capability, error) {
	ref, err := r.locate(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	tag := r.shards.of(ref.Principal)
	var cmd *redis.MapStringStringCmd
	if err := r.readDurable(ctx, "get", tag, func(p redis.Pipeliner) { cmd = p.HGetAll(ctx, opKey(tag, ref.Key)) }); err != nil {
		return nil, nil, err
	}
	h, err := cmd.Result()
	if err != nil {
		return nil, nil, unavailable("get", err)
	}
	op, err := r.decode(ref.Key, h)
	if err != nil {
		return nil, nil, err
	}
	raw, ok := h["c:"+nonceHash]
	if !ok {
		return op, nil, nil
	}
	c, err := r.decodeCapability(ref.Key, nonceHash, raw)
	if err != nil {
		return nil, nil, err
	}
	return op, c, nil
}

func (r *Redis) decodeCapability(key, nonceHash, raw string) (*approval.Capability, error) {
	var c capability
	if err := jsonUnmarshal(raw, &c); err != nil {
		err = &DecodeError{Key: key, Field: "c:" + nonceHash, Err: err}
		r.decodeFailed(err)
		return nil, err
	}
	return &approval.Capability{Approver: c.Approver, Channel: c.Channel, Expires: time.Unix(c.Expires, 0).UTC(), Revoked: c.Revoked}, nil
}

// RecordDelivery records a delivered job once.
func (r *Redis) RecordDelivery(ctx context.Context, ref approval.Ref, d approval.Delivery, ev approval.Event) (bool, *approval.Operation, error) {
	vals, err := r.run(ctx, deliveredScript, ref, "", d.At, d.Job,
		encodeDelivery(d),
		encodeEvent(ev, ev.PayloadHash)).Slice()
	if err != nil {
		return false, nil, unavailable("record delivery", err)
	}
	if n, _ := vals[0].(int64); n != 1 {
		return false, nil, nil
	}
	// One that does not decode is left for the caller's own read to report.
	var op *approval.Operation
	if len(vals) > 1 {
		if h := flat(vals[1]); len(h) > 0 {
			op, _ = r.decode(ref.Key, h)
		}
	}
	return true, op, nil
}

// FailDelivery records a failed attempt at a job and schedules its retry.
func (r *Redis) FailDelivery(ctx context.Context, ref approval.Ref, job string, least time.Duration, ev approval.Event) (int, time.Duration, error) {
	if ev.Details == nil {
		ev.Details = map[string]any{}
	}
	ev.Details["attempt"], ev.Details["retry_in_seconds"] = "#attempt", "#retry"
	tag := r.shards.of(ref.Principal)
	res, err := r.run(ctx, undeliveredScript, ref, "", ev.Time, job, leaseKey(tag, ref.Key, "job:"+job),
		max(least.Milliseconds(), 0), encodeEvent(ev, ev.PayloadHash)).Int64Slice()
	if err != nil {
		return 0, 0, unavailable("record failed delivery", err)
	}
	return int(res[0]), time.Duration(res[1]) * time.Millisecond, nil
}

// MarkSynced records what a message shows.
func (r *Redis) MarkSynced(ctx context.Context, ref approval.Ref, job, mark string) (bool, error) {
	n, err := r.run(ctx, syncedScript, ref, "", time.Time{}, job, mark).Int()
	if err != nil {
		return false, unavailable("mark synced", err)
	}
	return n == 1, nil
}

// SetUndoneBy links an operation to its undo.
func (r *Redis) SetUndoneBy(ctx context.Context, ref approval.Ref, prev, undo string, now time.Time) (bool, error) {
	n, err := r.run(ctx, undoneScript, ref, "undo:"+undo, now, prev, undo).Int()
	if err != nil {
		return false, unavailable("set undone_by", err)
	}
	return n == 1, nil
}

// Lease takes a short exclusive lease for holder, or reports how long the
// current holder keeps it.
func (r *Redis) Lease(ctx context.Context, ref approval.Ref, name, holder string, ttl time.Duration) (bool, time.Duration, error) {
	return r.lease(ctx, ref, name, "take", holder, ttl)
}

// LeaseAndGet is Lease, and when it is taken, Get of the operation under
// it, in one round trip.
func (r *Redis) LeaseAndGet(ctx context.Context, ref approval.Ref, name, holder string, ttl time.Duration) (bool, time.Duration, *approval.Operation, error) {
	ref, err := r.locate(ctx, ref)
	if err != nil {
		return false, 0, nil, err
	}
	tag := r.shards.of(ref.Principal)
	vals, err := leaseScript.Run(ctx, r.rdb, []string{leaseKey(tag, ref.Key, name), opKey(tag, ref.Key)},
		"take", holder, msArg(ttl)).Slice()
	if err != nil {
		return false, 0, nil, unavailable("lease", err)
	}
	got, _ := vals[0].(int64)
	left, _ := vals[1].(int64)
	if got != 1 {
		return false, time.Duration(max(left, 0)) * time.Millisecond, nil, nil
	}
	var h map[string]string
	if len(vals) > 2 {
		h = flat(vals[2])
	}
	op, err := r.decode(ref.Key, h)
	return true, 0, op, err
}

// RenewLease extends a lease its holder still holds.
func (r *Redis) RenewLease(ctx context.Context, ref approval.Ref, name, holder string, ttl time.Duration) (bool, error) {
	ok, _, err := r.lease(ctx, ref, name, "renew", holder, ttl)
	return ok, err
}

// Unlease releases a lease its holder holds.
func (r *Redis) Unlease(ctx context.Context, ref approval.Ref, name, holder string) error {
	_, _, err := r.lease(ctx, ref, name, "drop", holder, time.Millisecond)
	return err
}

func (r *Redis) lease(ctx context.Context, ref approval.Ref, name, verb, holder string, ttl time.Duration) (bool, time.Duration, error) {
	res, err := leaseScript.Run(ctx, r.rdb, []string{leaseKey(r.shards.of(ref.Principal), ref.Key, name)},
		verb, holder, msArg(ttl)).Int64Slice()
	if err != nil {
		return false, 0, unavailable("lease", err)
	}
	return res[0] == 1, time.Duration(max(res[1], 0)) * time.Millisecond, nil
}

func jsonOrEmpty[T any](v *T) string {
	if v == nil {
		return ""
	}
	return mustJSON(v)
}
