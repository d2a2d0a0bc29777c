package httpreq_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
)

// Each branch of the stale check's ETag paths (verify and stale in
// httpreq.go, the If-Match of Execute): the binding's ETag against the
// one read again, alone and with the state hash.

const calendarPatch = `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"title":"Retro"}}`

// TestStaleCheckBranchNoETagAtPrepare: a binding made without an ETag is
// checked by its state alone, even when the target gives one later, and
// its write carries no If-Match.
func TestStaleCheckBranchNoETagAtPrepare(t *testing.T) {
	f := newFakeTarget(t, false)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	op := opOf(t, prepare(t, a, calendarPatch))
	if op.State == nil || op.State.ETag != "" {
		t.Fatalf("binding %+v, want one without an ETag", op.State)
	}
	f.mu.Lock()
	f.etags = true
	f.mu.Unlock()
	if err := a.Recheck(bg, op); err != nil {
		t.Fatalf("an ETag that appeared, same state: %v", err)
	}
	if _, err := a.Execute(bg, op); err != nil {
		t.Fatalf("execute: %v", err)
	}
	if w := f.writes(); len(w) != 1 || w[0].IfMatch != "" {
		t.Fatalf("writes %+v, want one without If-Match", w)
	}
}

// TestStaleCheckBranchSameETag: the ETag seen at prepare, unchanged,
// passes and goes out as If-Match.
func TestStaleCheckBranchSameETag(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	op := opOf(t, prepare(t, a, calendarPatch))
	if op.State == nil || op.State.ETag != `"v1"` {
		t.Fatalf("binding %+v", op.State)
	}
	if err := a.Recheck(bg, op); err != nil {
		t.Fatalf("recheck: %v", err)
	}
	if _, err := a.Execute(bg, op); err != nil {
		t.Fatalf("execute: %v", err)
	}
	if w := f.writes(); len(w) != 1 || w[0].IfMatch != `"v1"` {
		t.Fatalf("writes %+v, want one with If-Match \"v1\"", w)
	}
}

// TestStaleCheckBranchStateMovedETagNot: a target that changes a bound
// field without a new ETag is still caught by the state hash, and the
// error says which field (reason changed, not etag_changed).
func TestStaleCheckBranchStateMovedETagNot(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	op := opOf(t, prepare(t, a, calendarPatch))
	f.mu.Lock()
	f.docs[eventPath]["start"] = "11:00" // same version, same ETag
	f.mu.Unlock()
	for name, err := range map[string]error{"recheck": a.Recheck(bg, op), "execute": func() error { _, err := a.Execute(bg, op); return err }()} {
		ee := execErr(t, err)
		if ee.Code != approval.CodeStaleState || ee.Details["reason"] != "changed" || !strings.Contains(ee.Message, "start") {
			t.Fatalf("%s: %s %v %q", name, ee.Code, ee.Details, ee.Message)
		}
		if _, ok := ee.Details["etag"]; ok {
			t.Fatalf("%s: an etag reason for a state change: %v", name, ee.Details)
		}
	}
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("written: %+v", w)
	}
}

// TestStaleCheckBranchETagAndStateMoved: both moved: the fields are named
// (the ETag alone would say less).
func TestStaleCheckBranchETagAndStateMoved(t *testing.T) {
	f := newFakeTarget(t, true)
	f.put(eventPath, event())
	a := newAction(t, calendarTarget(f))
	op := opOf(t, prepare(t, a, calendarPatch))
	f.change(eventPath, "title", "Planning")
	ee := execErr(t, a.Recheck(bg, op))
	changed, _ := ee.Details["changed"].([]approval.Change)
	if ee.Details["reason"] != "changed" || len(changed) != 1 || changed[0].Field != "title" {
		t.Fatalf("%v", ee.Details)
	}
}

// TestStaleCheckBranchETagTurnedWeak: a bound strong ETag that comes back
// weak (or not at all) cannot be matched by If-Match: stale, naming both.
func TestStaleCheckBranchETagTurnedWeak(t *testing.T) {
	for _, etag := range []string{`W/"v1"`, ""} {
		f := newFakeTarget(t, true)
		f.put(eventPath, event())
		a := newAction(t, calendarTarget(f))
		op := opOf(t, prepare(t, a, calendarPatch))
		f.mu.Lock()
		f.override = func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodGet {
				return false
			}
			if etag != "" {
				w.Header().Set("ETag", etag)
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(f.doc(eventPath))
			return true
		}
		f.mu.Unlock()
		ee := execErr(t, func() error { _, err := a.Execute(bg, op); return err }())
		if ee.Code != approval.CodeStaleState || ee.Details["reason"] != "etag_changed" || ee.Details["etag"] != "" ||
			!strings.Contains(ee.Message, `"v1"`) {
			t.Fatalf("ETag %q: %s %v %q", etag, ee.Code, ee.Details, ee.Message)
		}
		if w := f.writes(); len(w) != 0 {
			t.Fatalf("ETag %q: written %+v", etag, w)
		}
	}
}

// TestStaleCheckBranchUnboundWrite: an operation without a binding (a
// POST creating a resource) is written without a re-read or If-Match.
func TestStaleCheckBranchUnboundWrite(t *testing.T) {
	f := newFakeTarget(t, true)
	a := newAction(t, calendarTarget(f))
	op := opOf(t, prepare(t, a, `{"target":"calendar","method":"POST","path":"/events","body":{"title":"New"}}`))
	if op.State != nil {
		t.Fatalf("a POST bound to state: %+v", op.State)
	}
	if err := a.Recheck(bg, op); err != nil {
		t.Fatal(err)
	}
	res, err := a.Execute(bg, op)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		PostStateHash string `json:"post_state_hash"`
	}
	_ = json.Unmarshal(res, &r)
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].Method != "POST" || reqs[0].IfMatch != "" || r.PostStateHash != "" {
		t.Fatalf("requests %+v, result %s", reqs, res)
	}
}
