package store_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// A worker paused past its job lease while another delivered the job
// (issue 20, item 6): its late failure records nothing (no notify_failed
// for a delivered job), schedules no retry, and leaves the lease of the
// worker holding it now alone.
func TestLateFailedDeliveryOfADeliveredJobRecordsNothing(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	f.send(op)
	const job = "email:grace"
	lease := "job:" + job
	if got, _, err := f.st.Lease(bg, op.Ref(), lease, "paused", 50*time.Millisecond); err != nil || !got {
		t.Fatalf("the first worker's lease: %v %v", got, err)
	}
	// it is paused; its lease runs out (miniredis moves its TTLs every
	// 100 ms: store.RealTimeTTL)
	time.Sleep(300 * time.Millisecond)
	if got, _, err := f.st.Lease(bg, op.Ref(), lease, "other", time.Minute); err != nil || !got {
		t.Fatalf("the other worker's lease: %v %v", got, err)
	}
	d := approval.Delivery{Job: job, Channel: "email", To: "grace", At: f.now}
	if ok, _, err := f.st.RecordDelivery(bg, op.Ref(), d, approval.Event{Time: f.now, Event: "notified", Actor: "system"}); err != nil || !ok {
		t.Fatalf("the other worker's delivery: %v %v", ok, err)
	}
	// the paused worker resumes; its attempt failed (its SMTP session died)
	ev := approval.Event{Time: f.now, Event: "notify_failed", Actor: "system", Channel: "email", Details: map[string]any{"job": job}}
	attempt, wait, err := f.st.FailDelivery(bg, op.Ref(), job, 0, ev)
	if err != nil {
		t.Fatal(err)
	}
	if attempt != 0 || wait != 0 {
		t.Errorf("FailDelivery of a delivered job: attempt %d, retry in %s; want 0, 0 (nothing recorded)", attempt, wait)
	}
	evs, err := f.st.Events(bg, op.Ref())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Event == "notify_failed" {
			t.Errorf("the audit says the delivered job failed: %+v", e)
		}
	}
	// the lease is still the other worker's
	if got, _, err := f.st.Lease(bg, op.Ref(), lease, "third", time.Minute); err != nil || got {
		t.Errorf("the other worker's lease was taken from it by the late failure: %v %v", got, err)
	}
}
