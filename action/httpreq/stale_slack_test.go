package httpreq_test

import (
	"testing"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
)

// Stale 8 (needs the DecideAs re-check in approval/decide.go): a Slack
// click on an operation whose resource moved is not counted; the operation
// fails stale_state at once, so its Slack messages update to say so.
func TestStale_SlackClickAfterChange_NotCountedAndFailed(t *testing.T) {
	e := newSvcEnv(t, true)
	op := e.prepare(t, httpreq.Name, patchTitle)
	e.send(t, op.Key)
	e.target.change(eventPath, "start", "12:00")
	cur, res, err := e.svc.DecideAs(bg, op.Key, "grace", "slack", op.PayloadHash, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome == approval.DecideApproved || res.Outcome == approval.DecideRecorded {
		t.Fatalf("a click on a stale operation counted: %v", res.Outcome)
	}
	wantFailed(t, cur, approval.CodeStaleState)
	m := approval.BuildMessage(cur, e.svc.Policy(), e.svc.Now())
	if len(m.Stale) != 1 || m.Stale[0].Field != "start" {
		t.Fatalf("message stale = %+v", m.Stale)
	}
	if n := len(e.target.writes()); n != 0 {
		t.Fatalf("%d writes", n)
	}
}

// Needs omitempty on approval.Change.Before/After: an absent "before"
// stays absent (not null) once the operation is stored and read back.
func TestDiffRoundTripKeepsAbsentDistinctFromNull(t *testing.T) {
	e := newSvcEnv(t, true)
	op := e.prepare(t, httpreq.Name, `{"target":"calendar","method":"PATCH","path":"/events/42","body":{"location":"Room 1","owner":null}}`)
	stored, err := e.svc.Get(bg, e.agent, op.Key)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]approval.Change{}
	for _, c := range stored.Preview.Diff {
		rows[c.Field] = c
	}
	if c := rows["location"]; c.Before != nil || string(c.After) != `"Room 1"` {
		t.Fatalf("location = before %q after %q, want before absent", c.Before, c.After)
	}
	if c := rows["owner"]; string(c.Before) != `"sam"` || string(c.After) != "null" {
		t.Fatalf("owner = before %q after %q, want after null", c.Before, c.After)
	}
	if v := mustJSON(t, approval.AgentView(stored, e.svc.Now()).Preview.Diff); !contains(v, `{"field":"location","after":"Room 1"}`) {
		t.Fatalf("agent view diff = %s", v)
	}
}
