package store_test

import (
	"errors"
	"testing"

	"github.com/countersign/countersign/approval"
)

// Every create counts against the principal's rate, the refused ones too
// (a replayed idempotency key, a full quota), and a refused one changes no
// other counter.
func TestCreateCountsRefusedRequestsAgainstTheRate(t *testing.T) {
	f := newFixture(t)
	f.q.RequestsPerMinute, f.q.MaxDrafts = 4, 2
	if _, err := f.create("agent", 10, "k1"); err != nil {
		t.Fatal(err)
	}
	var bound *approval.Bound
	if _, err := f.create("agent", 10, "k1"); !errors.As(err, &bound) {
		t.Fatalf("replayed key: %v", err)
	}
	f.draft("agent", 10)
	before := f.usage("agent")
	if _, err := f.create("agent", 10, ""); code(err) != approval.CodeQuotaExceeded {
		t.Fatalf("third draft: %v", err)
	}
	if u := f.usage("agent"); u != before {
		t.Fatalf("a refused create changed the counters: %+v → %+v", before, u)
	}
	if _, err := f.create("agent", 10, ""); code(err) != approval.CodeRateLimited {
		t.Fatalf("fifth request: %v", err)
	}
	if u := f.usage("agent"); u.Drafts != 2 {
		t.Fatalf("drafts = %d", u.Drafts)
	}
}
