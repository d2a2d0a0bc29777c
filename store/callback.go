package store

import (
	"context"
	"time"

	"github.com/countersign/countersign/approval"
)

var _ approval.CallbackStore = (*Redis)(nil)

var (
	callbackSentScript   = opScript("callback_sent")
	callbackFailedScript = opScript("callback_failed")
)

// CallbackSent moves the status webhook's cursor to seq, if it stood at
// seq-1.
func (r *Redis) CallbackSent(ctx context.Context, ref approval.Ref, seq int) (bool, error) {
	n, err := r.run(ctx, callbackSentScript, ref, "", time.Time{}, seq).Int()
	if err != nil {
		return false, unavailable("record callback", err)
	}
	return n == 1, nil
}

// FailCallback counts a failed status webhook attempt, holds the callback
// lease for the backoff and schedules the retry.
func (r *Redis) FailCallback(ctx context.Context, ref approval.Ref, now time.Time, least time.Duration) (int, time.Duration, error) {
	lease := func(tag string) []string { return []string{leaseKey(tag, ref.Key, "callback")} }
	res, err := r.runKeys(ctx, callbackFailedScript, ref, lease, "", now, max(least.Milliseconds(), 0)).Int64Slice()
	if err != nil {
		return 0, 0, unavailable("record failed callback", err)
	}
	return int(res[0]), time.Duration(res[1]) * time.Millisecond, nil
}
