package httpreq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/countersign/countersign/approval"
)

// bodySHA256 is the body hash of a receipt's http claim.
func bodySHA256(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

// written is what countersign keeps of a write the target accepted.
type written struct {
	status  int
	excerpt string
	cut     bool
}

// writeOnce sends one write, exactly once: with Idempotency-Key idem,
// If-Match ifMatch when set, and Countersign-Receipt: the receipt of this
// exact write, minted right before it is sent (item names a bulk item's
// receipt, "" the operation's own). It never follows a redirect. excerpt
// bounds the response body kept.
//
// Errors: precondition_failed (412); execution_failed with outcome_unknown
// false when nothing was sent or the target answered with an error, and
// true when the request went out and no answer came back (or a gateway
// answered 502/504 or the target 303: it may have happened).
func (a *Action) writeOnce(ctx context.Context, t *target, r *Request, idem, ifMatch, item string, excerpt int) (*written, *approval.ExecError) {
	hdr := http.Header{"Idempotency-Key": {idem}, "Accept": {"application/json"}}
	if ifMatch != "" {
		hdr.Set("If-Match", ifMatch)
	}
	var body []byte
	if len(r.Body) > 0 {
		body = r.Body
		if _, ok := t.headers["Content-Type"]; !ok {
			hdr.Set("Content-Type", "application/json")
		}
	}
	u := t.url(r)
	// The receipt covers this exact write: minted now, after the re-read.
	tok, err := approval.CountersignerFrom(ctx).Mint(approval.ReceiptRequest{Audience: t.Name, Item: item,
		HTTP: &approval.ReceiptHTTP{Method: r.Method, URL: u, BodySHA256: bodySHA256(body), IfMatch: ifMatch}})
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "could not sign the receipt; nothing was written",
			Details: map[string]any{"phase": "receipt"}}
	}
	if tok != "" {
		hdr.Set(ReceiptHeader, tok)
	}
	var res sendResult
	attempts := 0
	var waited time.Duration
	for {
		attempts++
		res = a.do(ctx, t, r.Method, u, body, hdr, int64(excerpt))
		if res.err != nil || !t.retries(res.resp.status, attempts) {
			break
		}
		// The target refused it and asks (or may be asked) again later: the
		// one retry countersign makes, opted in per target, with the same
		// request, Idempotency-Key and receipt; the claim is re-checked on
		// the new connection before it goes out.
		w, ok := retryWait(res.resp.header, attempts)
		if !ok || waited+w > MaxRetryTotal {
			break // the target asks for longer than countersign waits
		}
		if dl, has := ctx.Deadline(); has && time.Until(dl) < w+t.timeout {
			break
		}
		if !sleepCtx(ctx, w) {
			break
		}
		waited += w
	}
	if res.err != nil && errors.Is(res.err, approval.ErrClaimLost) {
		ee := approval.ClaimLostExecError(res.err)
		if attempts > 1 {
			ee.Message += fmt.Sprintf(" again: the %d earlier attempt(s) were refused by the target, so nothing was applied", attempts-1)
			ee.Details["attempts"] = attempts - 1
		}
		return nil, ee
	}
	if res.err != nil {
		d := map[string]any{"phase": "write"}
		if isPrivate(res.err) {
			d["rule"] = "private_address"
		}
		msg := describe(res.err)
		if res.sent {
			msg += " after the request was sent: it may or may not have been applied. Do not retry blindly; the target can dedupe on Idempotency-Key " + idem
		} else {
			msg += " before the request was sent; nothing was written"
		}
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: msg, OutcomeUnknown: res.sent, Details: d}
	}
	resp := res.resp
	switch {
	case resp.status == http.StatusPreconditionFailed:
		return nil, &approval.ExecError{Code: approval.CodePreconditionFailed,
			Message: "the target refused the write because the resource changed after it was checked (412 to If-Match " + ifMatch + "); nothing was written. Prepare again.",
			Details: map[string]any{"status": resp.status, "if_match": ifMatch}}
	case resp.status >= 300 && resp.status < 400:
		unknown := resp.status == http.StatusSeeOther
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, OutcomeUnknown: unknown,
			Message: fmt.Sprintf("the target answered the write with a redirect (%s); countersign never follows redirects", statusText(resp.status)),
			Details: map[string]any{"status": resp.status, "rule": "redirect"}}
	case resp.status < 200 || resp.status >= 300:
		unknown := resp.status == http.StatusBadGateway || resp.status == http.StatusGatewayTimeout
		ex, _ := t.redactor.excerpt(resp.body, min(errorBodyBytes, excerpt))
		msg := fmt.Sprintf("the target refused the write with %s", statusText(resp.status))
		if unknown {
			msg = fmt.Sprintf("a gateway in front of the target answered %s: the write may or may not have reached it", statusText(resp.status))
		}
		d := map[string]any{"status": resp.status, "body": ex}
		if !unknown {
			// It reached the target, which answered: sent and refused.
			d["http_status"] = resp.status
			msg += "; it reached the target and nothing was applied"
		}
		if ra, ok := retryAfter(resp.header); ok {
			d["retry_after"] = int((ra + time.Second - 1) / time.Second)
		}
		if attempts > 1 {
			d["attempts"] = attempts
			msg += fmt.Sprintf(" (sent %d times with the same Idempotency-Key, as the target's retry allows)", attempts)
		}
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, OutcomeUnknown: unknown, Message: msg, Details: d}
	}
	ex, cut := t.redactor.excerpt(resp.body, excerpt)
	return &written{status: resp.status, excerpt: ex, cut: cut || resp.truncated}, nil
}
