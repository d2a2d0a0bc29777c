package store_test

import (
	"github.com/countersign/countersign/approval"
	"strings"
	"testing"
	"time"
)

// The trail is a field of the operation's hash; operations stored before
// kept it in a list of their own, which is read first.
func TestEventsReadTheTrailWhereverItWasKept(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	cancel := step(f.now.Add(time.Second), "canceled")
	if _, moved, err := f.st.Cancel(bg, op.Ref(), cancel); err != nil || !moved {
		t.Fatal(moved, err)
	}
	names := func() string {
		t.Helper()
		evs, err := f.st.Events(bg, op.Ref())
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range evs {
			if e.Operation != op.Key || e.PayloadHash != op.PayloadHash {
				t.Fatalf("event %+v", e)
			}
			n = append(n, e.Event)
		}
		return strings.Join(n, ",")
	}
	if got := names(); got != "prepared,canceled" {
		t.Fatalf("events %s", got)
	}
	keys, err := f.rdb.Keys(bg, "cs:*:e:"+op.Key).Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("a trail list was written: %v %v", keys, err)
	}
	// An operation whose first events were stored in the old list.
	o := f.rdb.Keys(bg, "cs:*:o:"+op.Key).Val()[0]
	e := strings.Replace(o, ":o:", ":e:", 1)
	old := `{"t":1,"n":"older","a":"test"}`
	if err := f.rdb.RPush(bg, e, old).Err(); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != "older,prepared,canceled" {
		t.Fatalf("events %s", got)
	}
}

func TestSweptOperationsRecordTheirExpiryInTheirTrail(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	evs, err := f.st.SweepExpired(bg, f.now.Add(16*time.Minute), approval.SweepTransition{Retention: time.Hour,
		DraftRetention: time.Minute, Event: approval.Event{Event: "expired", Actor: "system", Status: approval.StatusExpired}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("sweep: %v %v", evs, err)
	}
	trail, err := f.st.Events(bg, op.Ref())
	if err != nil || len(trail) != 2 || trail[1].Event != "expired" || trail[1].Status != approval.StatusExpired {
		t.Fatalf("trail %+v, %v", trail, err)
	}
}
