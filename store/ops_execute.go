package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/countersign/countersign/approval"
)

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
