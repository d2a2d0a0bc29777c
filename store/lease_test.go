package store_test

import (
	"testing"
	"time"
)

// The three lease scripts, one per transition (lease_take, lease_renew,
// lease_drop): what each does to a lease held by its caller, by someone
// else, and by nobody.
func TestLeaseTakeRenewDrop(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	ref := op.Ref()

	if ok, _ := f.st.RenewLease(bg, ref, "job:y", "a", time.Minute); ok {
		t.Fatal("renew took a lease nobody held")
	}
	if ok, _, err := f.st.Lease(bg, ref, "job:y", "b", time.Second); err != nil || !ok {
		t.Fatalf("the lease a failed renew left: %v %v", ok, err)
	}

	if ok, _, err := f.st.Lease(bg, ref, "job:x", "a", time.Second); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := f.st.RenewLease(bg, ref, "job:x", "a", time.Hour); err != nil || !ok {
		t.Fatalf("holder's renew: %v %v", ok, err)
	}
	if _, left, _ := f.st.Lease(bg, ref, "job:x", "b", time.Minute); left <= time.Minute {
		t.Fatalf("renewed for an hour, %s left", left)
	}
	// A take repeated by its holder (its reply was lost) reads as taken,
	// with the operation when asked for it.
	ok, _, got, err := f.st.LeaseAndGet(bg, ref, "job:x", "a", time.Minute)
	if err != nil || !ok || got == nil || got.Key != op.Key {
		t.Fatalf("holder's repeated take: %v %v %v", ok, got, err)
	}
	ok, left, got, err := f.st.LeaseAndGet(bg, ref, "job:x", "b", time.Minute)
	if err != nil || ok || got != nil || left <= 0 {
		t.Fatalf("other's take: %v %s %v %v", ok, left, got, err)
	}
	if err := f.st.Unlease(bg, ref, "job:x", "a"); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Unlease(bg, ref, "job:x", "a"); err != nil {
		t.Fatalf("dropping a free lease: %v", err)
	}
	if ok, _ := f.st.RenewLease(bg, ref, "job:x", "a", time.Minute); ok {
		t.Fatal("renewed a dropped lease")
	}
}
