package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

// Create stores a new draft with its quotas, rate limit and idempotency
// binding in one round trip.
func (r *Redis) Create(ctx context.Context, op *approval.Operation, t approval.CreateTransition) error {
	binding := func(tag string) []string {
		if op.IdempotencyKey == "" {
			return nil
		}
		return []string{idemKey(tag, op.Principal, op.IdempotencyKey)}
	}
	d, pv, ev, in := encodeDoc(op), r.storedPreview(op), encodeEvent(t.Event, op.PayloadHash), pack(string(op.Input))
	size := int64(len(d)+len(op.Input)+len(pv)+len(ev)) + storeOverhead
	if t.MaxBytes > 0 && size > t.MaxBytes {
		return approval.FieldErrors{{Field: "input", Reason: fmt.Sprintf(
			"the prepared operation would take %d bytes to keep; a request of this size may take at most %d", size, t.MaxBytes)}}.Err()
	}
	q := t.Quotas
	res, err := reply(r.runKeys(ctx, createScript, op.Ref(), binding, t.Tx, t.Now, msArg(t.TTL), ms(op.ExpiresAt),
		q.RequestsPerMinute, q.MaxDrafts, q.MaxStoredBytes, size, countersKeyPrefix(r.shards.of(op.Principal)),
		op.PayloadHash, ev, d, in, pv))
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
	al := func(tag string) []string { return []string{allowancesKey(tag, ref.Principal)} }
	cmd := r.runKeys(ctx, sendScript, ref, al, t.Tx, t.Now, args...)
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
