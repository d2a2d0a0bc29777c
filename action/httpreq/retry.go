package httpreq

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Retry is a target's opt-in retry of a write the target refused with one
// of the statuses On (429, 503: the target answered and applied nothing),
// at most Max more times. It is the one exception to "never retried
// automatically" (docs/http-targets.md): it resends the very same request,
// Idempotency-Key and receipt included, so configure it only for targets
// that dedupe by that key.
type Retry struct {
	On  []int
	Max int
}

// RetryStatuses are the statuses a retry may be configured on: both say
// the target itself refused the request and applied nothing. 502 and 504
// are not among them: a gateway's answer leaves open whether the write
// reached the target.
var RetryStatuses = []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}

// Bounds of a retry: at most MaxRetries more attempts, each waiting what
// the target's Retry-After asks (seconds or an HTTP date) but never more
// than MaxRetryWait, and all of them together no more than MaxRetryTotal.
// A target asking for longer is not retried: its refusal is reported with
// details.retry_after.
const (
	MaxRetries    = 5
	MaxRetryWait  = 60 * time.Second
	MaxRetryTotal = 2 * time.Minute
)

// CheckRetry validates a target's retry.
func CheckRetry(r *Retry) error {
	if r == nil {
		return nil
	}
	if len(r.On) == 0 {
		return fmt.Errorf("retry.on must list the statuses to retry (429, 503)")
	}
	for i, c := range r.On {
		if !slices.Contains(RetryStatuses, c) {
			return fmt.Errorf("retry.on: %d cannot be retried (only 429 and 503, which say the target applied nothing; 502 and 504 leave it open)", c)
		}
		if slices.Contains(r.On[:i], c) {
			return fmt.Errorf("retry.on: %d is listed twice", c)
		}
	}
	if r.Max < 1 || r.Max > MaxRetries {
		return fmt.Errorf("retry.max must be between 1 and %d", MaxRetries)
	}
	return nil
}

// retries reports whether a write refused with status after attempts
// attempts is sent again.
func (t *target) retries(status, attempts int) bool {
	r := t.Retry
	return r != nil && slices.Contains(r.On, status) && attempts <= r.Max
}

// now is the clock a Retry-After date is read against when the answer has
// no Date header (tests replace it).
var now = time.Now

// retryAfter reads a Retry-After header: delay-seconds, or an HTTP date
// taken relative to the answer's own Date header (else this clock).
func retryAfter(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, 1<<30)) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	ref := now()
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		ref = d
	}
	return max(at.Sub(ref), 0), true
}

// retryWait is how long to wait before attempt attempts+1: the target's
// Retry-After, else 1 s, 2 s, 4 s …; false when the target asks for more
// than MaxRetryWait.
func retryWait(h http.Header, attempts int) (time.Duration, bool) {
	w, ok := retryAfter(h)
	if !ok {
		w = time.Second << min(attempts-1, 5)
	}
	return w, w <= MaxRetryWait
}

// sleepCtx waits d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
