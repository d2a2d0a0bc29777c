package httpreq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
)

const postEvent = `{"target":"calendar","method":"POST","path":"/events","body":{"title":"x"}}`

// refuseN makes the target answer the first n writes with status and the
// header h, and the rest normally.
func refuseN(f *fakeTarget, n int, status int, h map[string]string) {
	var seen atomic.Int32
	f.mu.Lock()
	defer f.mu.Unlock()
	f.override = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet || int(seen.Add(1)) > n {
			return false
		}
		for k, v := range h {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":"slow down"}`))
		return true
	}
}

// A 429 or 503 is the target's refusal of a write it received: reported
// as such, with the status and Retry-After, never as "failed before
// anything was sent", and not retried unless the target opts in.
func TestRefusalIsReportedAsSentAndRefused(t *testing.T) {
	date := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		status int
		h      map[string]string
		after  int
	}{
		{"429 seconds", 429, map[string]string{"Retry-After": "7"}, 7},
		{"503 http date", 503, map[string]string{"Retry-After": date.Add(30 * time.Second).Format(http.TimeFormat), "Date": date.Format(http.TimeFormat)}, 30},
		{"503 without Retry-After", 503, nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTarget(t, false)
			a := newAction(t, calendarTarget(f))
			refuseN(f, 100, tc.status, tc.h)
			_, err := a.Execute(bg, opOf(t, prepare(t, a, postEvent)))
			ee := execErr(t, err)
			if ee.Code != approval.CodeExecutionFailed || ee.OutcomeUnknown {
				t.Fatalf("%s unknown=%v", ee.Code, ee.OutcomeUnknown)
			}
			if ee.Details["http_status"] != tc.status || !strings.Contains(ee.Message, "reached the target") {
				t.Fatalf("details %v, message %q", ee.Details, ee.Message)
			}
			if got, ok := ee.Details["retry_after"].(int); tc.after >= 0 && (!ok || got != tc.after) || tc.after < 0 && ok {
				t.Fatalf("retry_after %v, want %d", ee.Details["retry_after"], tc.after)
			}
			if n := len(f.writes()); n != 1 {
				t.Fatalf("%d writes without a retry configured", n)
			}
			// What the agent is told.
			no := false
			op := &approval.Operation{Status: approval.StatusFailed, Error: &approval.OpError{Code: ee.Code, Message: ee.Message,
				OutcomeUnknown: &no, Details: jsonRoundTrip(t, ee.Details)}}
			v := approval.AgentView(op, date)
			if strings.Contains(v.NextStep, "before anything was sent") || !strings.Contains(v.NextStep, fmt.Sprintf("refused it with HTTP %d", tc.status)) {
				t.Fatalf("next step %q", v.NextStep)
			}
			if tc.after >= 0 && !strings.Contains(v.NextStep, fmt.Sprintf("wait %d s", tc.after)) {
				t.Fatalf("next step %q has no wait", v.NextStep)
			}
		})
	}
}

// A target that opted in is sent the same write again, same
// Idempotency-Key, honouring Retry-After, at most retry.max more times,
// and only on the statuses it listed.
func TestRetryOnlyWhereConfigured(t *testing.T) {
	for _, tc := range []struct {
		name     string
		retry    *httpreq.Retry
		refusals int
		status   int
		after    string
		writes   int
		ok       bool
	}{
		{"429 then accepted", &httpreq.Retry{On: []int{429}, Max: 2}, 2, 429, "0", 3, true},
		{"503 not listed", &httpreq.Retry{On: []int{429}, Max: 2}, 1, 503, "0", 1, false},
		{"exhausted", &httpreq.Retry{On: []int{429, 503}, Max: 2}, 100, 503, "0", 3, false},
		{"asks for too long", &httpreq.Retry{On: []int{429}, Max: 2}, 1, 429, "120", 1, false},
		{"no Retry-After: backoff", &httpreq.Retry{On: []int{503}, Max: 1}, 1, 503, "", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTarget(t, false)
			tg := calendarTarget(f)
			tg.Retry = tc.retry
			a := newAction(t, tg)
			h := map[string]string{}
			if tc.after != "" {
				h["Retry-After"] = tc.after
			}
			refuseN(f, tc.refusals, tc.status, h)
			var checks atomic.Int32
			ctx := approval.WithClaimCheck(bg, func(context.Context) error { checks.Add(1); return nil })
			_, err := a.Execute(ctx, opOf(t, prepare(t, a, postEvent)))
			if (err == nil) != tc.ok {
				t.Fatalf("err %v", err)
			}
			ws := f.writes()
			if len(ws) != tc.writes {
				t.Fatalf("%d writes, want %d", len(ws), tc.writes)
			}
			for _, w := range ws {
				if w.IdempotencyKey != ws[0].IdempotencyKey {
					t.Fatalf("Idempotency-Key changed between attempts: %q, %q", ws[0].IdempotencyKey, w.IdempotencyKey)
				}
			}
			if int(checks.Load()) != tc.writes {
				t.Fatalf("the claim was re-checked %d times for %d writes", checks.Load(), tc.writes)
			}
			if !tc.ok && tc.writes > 1 {
				if d := execErr(t, err).Details; d["attempts"] != tc.writes {
					t.Fatalf("details %v", d)
				}
			}
		})
	}
}

func TestRetryConfigIsBounded(t *testing.T) {
	f := newFakeTarget(t, false)
	for _, r := range []*httpreq.Retry{{On: []int{502}, Max: 1}, {On: []int{429}, Max: 6}, {On: []int{429}, Max: 0}, {On: nil, Max: 1}, {On: []int{429, 429}, Max: 1}} {
		tg := calendarTarget(f)
		tg.Retry = r
		if _, err := httpreq.New([]httpreq.Target{tg}); err == nil {
			t.Errorf("retry %+v accepted", r)
		}
	}
}

// A write whose claim is lost (an operator settled it, or its lease ran
// out while the process was paused) never reaches the target: the claim
// is re-checked on the write's own connection, after dialing.
func TestLostClaimWritesNothing(t *testing.T) {
	f := newFakeTarget(t, false)
	a := newAction(t, calendarTarget(f))
	var checks atomic.Int32
	ctx := approval.WithClaimCheck(bg, func(context.Context) error {
		checks.Add(1)
		return &approval.ClaimLostError{Status: approval.StatusFailed}
	})
	op := opOf(t, prepare(t, a, postEvent))
	before := len(f.requests())
	_, err := a.Execute(ctx, op)
	ee := execErr(t, err)
	if ee.OutcomeUnknown || ee.Details["phase"] != "fence" || !strings.Contains(ee.Message, "nothing was sent") {
		t.Fatalf("%+v", ee)
	}
	if checks.Load() != 1 || len(f.requests()) != before {
		t.Fatalf("%d checks, %d requests at the target", checks.Load(), len(f.requests())-before)
	}
}

// jsonRoundTrip is details as the store gives them back.
func jsonRoundTrip(t *testing.T, d map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Bulk items behave as single writes: a refused item is retried with its
// own Idempotency-Key where the target opted in, applied once, and an item
// whose claim is lost is not sent; the items before it stay written.
func TestBulkItemsRetryAndFenceLikeSingleWrites(t *testing.T) {
	e := newSvcEnvWith(t, true, func(tg *httpreq.Target) { tg.Retry = &httpreq.Retry{On: []int{429}, Max: 1} })
	putEvents(e.target, 3)
	op := e.prepare(t, httpreq.Name, reschedule(3))
	e.approve(t, e.send(t, op.Key))
	var refused atomic.Bool
	e.target.mu.Lock()
	e.target.override = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPatch && r.URL.Path == eventAt(2) && !refused.Swap(true) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return true
		}
		return false
	}
	e.target.mu.Unlock()
	cur := e.run(t, op.Key)
	if cur.Status != approval.StatusSucceeded {
		t.Fatalf("status %s %+v", cur.Status, cur.Error)
	}
	keys := writesByKey(e.target)
	for n, want := range map[int]int{1: 1, 2: 2, 3: 1} { // item 2: refused once, then applied
		if got := keys[fmt.Sprintf("%s:%d", op.Key, n)]; got != want {
			t.Errorf("requests with Idempotency-Key %s:%d = %d, want %d", op.Key, n, got, want)
		}
	}

	// The claim is lost after the first item: nothing more is sent.
	f := newFakeTarget(t, true)
	putEvents(f, 3)
	a := newAction(t, calendarTarget(f))
	bop := opOf(t, prepare(t, a, reschedule(3)))
	var checks atomic.Int32
	ctx := approval.WithClaimCheck(bg, func(context.Context) error {
		if checks.Add(1) > 1 {
			return &approval.ClaimLostError{Status: approval.StatusFailed}
		}
		return nil
	})
	_, err := a.Execute(ctx, bop)
	ee := execErr(t, err)
	if ee.OutcomeUnknown || ee.Details["phase"] != "fence" || ee.Details["written"] != 1 || ee.Details["item"] != 2 {
		t.Fatalf("%s %+v", ee.Message, ee.Details)
	}
	if n := len(f.writes()); n != 1 {
		t.Fatalf("%d writes reached the target; want only item 1", n)
	}
}
