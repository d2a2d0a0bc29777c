package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/audit"
	"github.com/redis/go-redis/v9"
)

var _ audit.Source = (*Redis)(nil)

// Each shard is one audit chain, named by its tag without braces ("s3.17").
func chainName(tag string) string { return strings.Trim(tag, "{}") }

func (r *Redis) tagOfChain(chain string) (string, error) {
	for _, t := range r.shards.tags {
		if chainName(t) == chain {
			return t, nil
		}
	}
	return "", fmt.Errorf("store: no audit chain %q", chain)
}

// AuditLease takes or renews the sealer's lease.
func (r *Redis) AuditLease(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	res, err := takeLeaseScript.Run(ctx, r.rdb, []string{auditLeaseKey}, holder, msArg(ttl)).Int64Slice()
	if err != nil {
		return false, unavailable("audit lease", err)
	}
	return res[0] == 1, nil
}

// AuditRelease gives the sealer's lease up.
func (r *Redis) AuditRelease(ctx context.Context, holder string) error {
	return unavailable("audit lease", dropLeaseScript.Run(ctx, r.rdb, []string{auditLeaseKey}, holder).Err())
}

// AuditPending reads every chain's head and the raw events after it, in
// one round trip.
func (r *Redis) AuditPending(ctx context.Context, max int) ([]audit.Batch, error) {
	pipe := r.rdb.Pipeline()
	heads := make([]*redis.MapStringStringCmd, len(r.shards.tags))
	for i, tag := range r.shards.tags {
		heads[i] = pipe.HGetAll(ctx, auditHeadKey(tag))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("audit heads", err)
	}
	pipe = r.rdb.Pipeline()
	raws := make([]*redis.XMessageSliceCmd, len(r.shards.tags))
	out := make([]audit.Batch, len(r.shards.tags))
	for i, tag := range r.shards.tags {
		h := heads[i].Val()
		seq, _ := strconv.ParseInt(h["seq"], 10, 64)
		since, _ := strconv.ParseInt(h["since"], 10, 64)
		head := audit.Head{ID: h["id"], Seq: seq, Hash: h["hash"], Since: since}
		if cp := h["cp"]; cp != "" && cp != "0" {
			head.LastCheckpoint = fromMS(cp)
		}
		out[i] = audit.Batch{Chain: chainName(tag), Head: head}
		start := "-"
		if head.ID != "" {
			start = "(" + head.ID
		}
		raws[i] = pipe.XRangeN(ctx, auditKey(tag), start, "+", int64(max))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("audit events", err)
	}
	for i := range out {
		for _, m := range raws[i].Val() {
			k, _ := m.Values["k"].(string)
			h, _ := m.Values["h"].(string)
			e, _ := m.Values["e"].(string)
			ev, err := decodeEvent(e, k, h)
			if err != nil {
				err = &DecodeError{Key: k, Field: "audit " + m.ID, Err: err}
				r.decodeFailed(err)
				return nil, err
			}
			out[i].Raw = append(out[i].Raw, audit.Raw{ID: m.ID, Event: ev})
		}
	}
	return out, nil
}

// AuditAdvance moves a chain's head and drops what it sealed.
func (r *Redis) AuditAdvance(ctx context.Context, chain string, from, to audit.Head) (bool, error) {
	tag, err := r.tagOfChain(chain)
	if err != nil {
		return false, err
	}
	cp := int64(0)
	if !to.LastCheckpoint.IsZero() {
		cp = ms(to.LastCheckpoint)
	}
	n, err := advanceScript.Run(ctx, r.rdb, []string{auditHeadKey(tag), auditKey(tag)}, from.ID, to.ID, to.Seq, to.Hash,
		cp, to.Since, nextID(to.ID)).Int()
	if err != nil {
		return false, unavailable("audit advance", err)
	}
	return n == 1, nil
}

// nextID is the stream id right after id ("1700000000000-3" → "…-4").
func nextID(id string) string {
	t, s, ok := strings.Cut(id, "-")
	n, err := strconv.ParseUint(s, 10, 64)
	if !ok || err != nil {
		return id
	}
	return t + "-" + strconv.FormatUint(n+1, 10)
}

// AuditAppend adds an event to a chain that belongs to no operation (a
// checkpoint).
func (r *Redis) AuditAppend(ctx context.Context, chain string, ev approval.Event) error {
	tag, err := r.tagOfChain(chain)
	if err != nil {
		return err
	}
	return unavailable("audit append", r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: auditKey(tag),
		Values: []any{"k", ev.Operation, "h", ev.PayloadHash, "e", encodeEvent(ev, ev.PayloadHash)}}).Err())
}

var _ audit.HeadSource = (*Redis)(nil)

// AuditHeads reads where every chain stands, in one round trip. Each
// chain's seq and hash come from one HMGET of its head hash, which the
// advance script sets in one step, so they always belong together; the
// sealer moves a head only after writing its entries, so a head never
// names an entry that is not in the audit log yet.
func (r *Redis) AuditHeads(ctx context.Context) ([]audit.ChainHead, error) {
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(r.shards.tags))
	for i, tag := range r.shards.tags {
		cmds[i] = pipe.HMGet(ctx, auditHeadKey(tag), "seq", "hash")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("audit heads", err)
	}
	out := make([]audit.ChainHead, len(r.shards.tags))
	for i, tag := range r.shards.tags {
		v := cmds[i].Val()
		seq, hash := "", ""
		if len(v) == 2 {
			seq, _ = v[0].(string)
			hash, _ = v[1].(string)
		}
		n, err := strconv.ParseInt(seq, 10, 64)
		if seq == "" {
			n, err = 0, nil
		}
		if err != nil || (n > 0) != (hash != "") {
			return nil, fmt.Errorf("store: audit head of %s is unreadable", chainName(tag))
		}
		out[i] = audit.ChainHead{Chain: chainName(tag), Seq: n, Hash: hash}
	}
	return out, nil
}
