package store

import (
	"context"
	"time"

	"github.com/countersign/countersign/approval"
)

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
	lease := func(tag string) []string { return []string{leaseKey(tag, ref.Key, "job:"+job)} }
	res, err := r.runKeys(ctx, undeliveredScript, ref, lease, "", ev.Time, job,
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
