package store

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

func TestDeliveriesReadBackWhateverFormTheyWereStoredIn(t *testing.T) {
	at := time.UnixMilli(1900000000123).UTC()
	for _, d := range []approval.Delivery{
		{Job: "webhook:humans:grace", Channel: "webhook", To: "grace", At: at},
		{Job: "slack:#approvals", Channel: "slack", To: "#approvals", At: at, Handle: map[string]string{"channel": "C1", "ts": "1.2"}},
		{Job: "odd-job", Channel: "email", To: "ada", At: at},  // a channel the id does not start with
		{Job: "email:grace", Channel: "email", To: "", At: at}, // nobody the id ends with
		{Job: "email:grace#escalated", Channel: "email", To: "grace", At: at},
	} {
		h := map[string]string{"d": `{"a":"x","r":{"n":"r","a":[],"q":1,"c":[],"t":60},"c":1}`, "dl:" + d.Job: encodeDelivery(d)}
		op, err := decodeOp("op_x", h)
		if err != nil || len(op.Deliveries) != 1 || !reflect.DeepEqual(op.Deliveries[0], d) {
			t.Fatalf("%s: stored %s, read %+v, %v", d.Job, h["dl:"+d.Job], op.Deliveries, err)
		}
	}
	if raw := encodeDelivery(approval.Delivery{Job: "webhook:humans:grace", Channel: "webhook", To: "grace", At: at}); raw != `{"t":1900000000123}` {
		t.Errorf("a delivery to whom its job names is stored as %s", raw)
	}
	old := map[string]string{"d": `{"a":"x","r":{"n":"r","a":[],"q":1,"c":[],"t":60},"c":1}`,
		"dl:email:grace": `{"j":"email:grace","c":"email","to":"grace","t":1900000000123}`}
	op, err := decodeOp("op_x", old)
	want := approval.Delivery{Job: "email:grace", Channel: "email", To: "grace", At: at}
	if err != nil || len(op.Deliveries) != 1 || !reflect.DeepEqual(op.Deliveries[0], want) {
		t.Fatalf("a delivery stored before: %+v, %v", op.Deliveries, err)
	}
}

func TestEventsAndJobsReadBackWhateverFormTheyWereStoredIn(t *testing.T) {
	at := time.UnixMilli(1900000000123).UTC()
	for _, ev := range []approval.Event{
		{Time: at, Event: "sent", Actor: "principal:agent", Status: approval.StatusPending, Details: map[string]any{"required": 1.0}},
		{Time: at, Event: "notified", Actor: "system", Channel: "email", Status: approval.StatusPending},
		{Time: at, Event: "an event named later", Actor: "approver:ada", Channel: "pager", Status: "a status named later"},
		{Time: at, Event: "approved", Actor: "approver:ada", Channel: "slack", PayloadHash: "sha256:other"},
	} {
		raw := encodeEvent(ev, "sha256:op")
		got, err := decodeEvent(raw, "op_x", "sha256:op")
		want := ev
		want.Operation = "op_x"
		if want.PayloadHash == "" {
			want.PayloadHash = "sha256:op"
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("stored %s, read %+v, %v; want %+v", raw, got, err, want)
		}
	}
	// Codes are short: a pending event's name and status take a byte each.
	if raw := encodeEvent(approval.Event{Time: at, Event: "sent", Actor: "system", Status: approval.StatusPending}, ""); raw != `{"t":1900000000123,"n":12,"a":25,"s":2}` {
		t.Errorf("coded event %s", raw)
	}
	// Stored before codes existed, and an unknown code (a newer build's).
	old := `{"t":1900000000123,"n":"sent","a":"principal:agent","s":"pending_approval"}`
	if got, err := decodeEvent(old, "op_x", "h"); err != nil || got.Event != "sent" || got.Status != approval.StatusPending {
		t.Errorf("an event stored before: %+v, %v", got, err)
	}
	for _, bad := range []string{`{"t":1,"n":0,"a":"x"}`, `{"t":1,"n":9999,"a":"x"}`, `{"t":1,"n":-1,"a":"x"}`, `{"t":1,"n":1.5,"a":"x"}`} {
		if _, err := decodeEvent(bad, "op_x", "h"); err == nil {
			t.Errorf("%s read without an error", bad)
		}
	}

	jobs := []approval.Job{
		{ID: "webhook:humans:grace", Channel: "webhook", Target: "humans", Approver: "grace", Link: true},
		{ID: "email:grace", Channel: "email", Approver: "grace", Link: true},
		{ID: "slack:#approvals", Channel: "slack", Target: "#approvals"},
		{ID: "email:grace#escalated", Channel: "email", Approver: "grace", Of: "email:grace"}, // an id of its own
	}
	h := map[string]string{"d": `{"a":"x","r":{"n":"r","a":[],"q":1,"c":[],"t":60},"c":1}`, "j": encodeJobs(jobs)}
	op, err := decodeOp("op_x", h)
	if err != nil || !reflect.DeepEqual(op.Jobs, jobs) {
		t.Fatalf("jobs stored as %s read back %+v, %v", h["j"], op.Jobs, err)
	}
	if n := strings.Count(h["j"], `"i":`); n != 1 {
		t.Errorf("jobs stored with %d ids, want only the one that is not derived: %s", n, h["j"])
	}
	h["j"] = `[{"i":"email:grace","c":"email","w":"grace","l":true}]` // stored before
	if op, err := decodeOp("op_x", h); err != nil || len(op.Jobs) != 1 || op.Jobs[0] != jobs[1] {
		t.Errorf("a job stored before: %+v, %v", op.Jobs, err)
	}
}
