package store_test

import "testing"

// What a message shows never goes back: a worker holding an older read of
// the operation (a lower version) cannot edit a message showing a later
// state back to it. Marks are "version|what it shows".
func TestSyncedMarkNeverGoesBack(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	f.send(op)
	for _, tc := range []struct {
		mark  string
		fresh bool
	}{
		{"3|pending_approval/1/0", true},
		{"3|pending_approval/1/0", false}, // shown already
		{"5|approved/2/0", true},
		{"3|pending_approval/1/0", false}, // an older read
		{"7|succeeded/2/0", true},
		{"5|approved/2/0", false}, // an older read, landing late
		{"7|succeeded/2/0", false},
		{"", true},                // an update failed: forget, so the retry updates
		{"5|approved/2/0", true},  // nothing to compare with once forgotten
		{"7|succeeded/2/0", true}, // and the retry brings it forward
	} {
		fresh, err := f.st.MarkSynced(bg, op.Ref(), "slack:#approvals", tc.mark)
		if err != nil {
			t.Fatal(err)
		}
		if fresh != tc.fresh {
			t.Fatalf("mark %q: fresh %v, want %v", tc.mark, fresh, tc.fresh)
		}
	}
	// Each message has its own mark.
	if fresh, err := f.st.MarkSynced(bg, op.Ref(), "email:grace", "5|approved/2/0"); err != nil || !fresh {
		t.Fatalf("another job: %v %v", fresh, err)
	}
}
