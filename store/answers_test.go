package store_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// TestGetLinkReadsWhatGetAndCapabilityRead: the one-round-trip read of an
// operation with a link record gives what the two reads give, by key
// alone too (the page's path), and no record for a nonce never issued.
func TestGetLinkReadsWhatGetAndCapabilityRead(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	f.send(op)
	want := approval.Capability{Approver: "grace", Channel: "email", Expires: f.now.Add(time.Hour).Truncate(time.Second)}
	if ok, err := f.st.AddCapability(bg, op.Ref(), "n1", want, f.now); err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, ref := range []approval.Ref{op.Ref(), {Key: op.Key}} {
		got, c, err := f.st.GetLink(bg, ref, "n1")
		if err != nil {
			t.Fatal(err)
		}
		if c == nil || *c != want {
			t.Fatalf("link record = %+v, want %+v", c, want)
		}
		if cur := f.get(op); !reflect.DeepEqual(got, cur) {
			t.Fatalf("GetLink's operation differs from Get's:\n%+v\n%+v", got, cur)
		}
		if sep, err := f.st.Capability(bg, op.Ref(), "n1"); err != nil || *sep != *c {
			t.Fatalf("Capability = %+v, %v", sep, err)
		}
	}
	if _, c, err := f.st.GetLink(bg, op.Ref(), "n2"); err != nil || c != nil {
		t.Fatalf("a nonce never issued: %+v, %v", c, err)
	}
	if _, _, err := f.st.GetLink(bg, approval.Ref{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, "n1"); approval.ErrorCode(err) != approval.CodeNotFound {
		t.Fatalf("missing operation: %v", err)
	}
}

// TestDecideAnswersWithTheOperation: a decision's answer carries the
// operation as the decision left it, the same as a read right after, for
// a recorded approval, the quorum, and a refused decision.
func TestDecideAnswersWithTheOperation(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	f.send(op)
	for _, who := range []string{"grace", "grace", "ada"} {
		res, err := f.st.Decide(bg, op.Ref(), f.decision(op, who, true))
		if err != nil {
			t.Fatal(err)
		}
		cur := f.get(op)
		if res.Operation == nil || !reflect.DeepEqual(res.Operation, cur) {
			t.Fatalf("%s (%s): the answer's operation differs from a read:\n%+v\n%+v", who, res.Outcome, res.Operation, cur)
		}
		if res.Operation.Status != res.Status {
			t.Fatalf("%s: status %s, the operation says %s", who, res.Status, res.Operation.Status)
		}
	}
	if cur := f.get(op); cur.Status != approval.StatusApproved || len(cur.Approvals) != 2 {
		t.Fatalf("after both: %s with %d approvals", cur.Status, len(cur.Approvals))
	}
}

// TestSendAnswersWithTheOperation: a send's answer carries the operation
// as the send left it, the same as a read right after, when it moved it
// and when it was sent already (the agent's retry).
func TestSendAnswersWithTheOperation(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	tr := approval.SendTransition{Step: step(f.now, "sent"), ExpiresAt: f.now.Add(time.Hour), TTL: 2 * time.Hour, Quotas: f.q}
	for i, want := range []approval.Status{approval.StatusDraft, approval.StatusDraft, approval.StatusPending} {
		if i == 2 {
			tr.Tx = approval.RandomToken(8) // another call: no longer a draft
		}
		before, after, err := f.st.Send(bg, op.Ref(), tr)
		if err != nil || before != want {
			t.Fatalf("send %d: %s, %v; want %s", i, before, err, want)
		}
		cur := f.get(op)
		if after == nil || !reflect.DeepEqual(after, cur) {
			t.Fatalf("send %d: the answer's operation differs from a read:\n%+v\n%+v", i, after, cur)
		}
		if cur.Status != approval.StatusPending {
			t.Fatalf("send %d: %s", i, cur.Status)
		}
	}
}

// TestLeaseAndGetReadsUnderTheLease: the lease's taker gets the operation
// as a read gives it, and so does its retry (a reply that came late);
// another holder gets neither the lease nor the operation.
func TestLeaseAndGetReadsUnderTheLease(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	f.send(op)
	for i := range 2 { // the second: the same holder's retried take
		got, _, cur, err := f.st.LeaseAndGet(bg, op.Ref(), "job:x", "h1", time.Minute)
		if err != nil || !got {
			t.Fatalf("take %d: %v, %v", i, got, err)
		}
		if want := f.get(op); !reflect.DeepEqual(cur, want) {
			t.Fatalf("take %d: the operation under the lease differs from a read:\n%+v\n%+v", i, cur, want)
		}
	}
	got, left, cur, err := f.st.LeaseAndGet(bg, op.Ref(), "job:x", "h2", time.Minute)
	if err != nil || got || cur != nil || left <= 0 {
		t.Fatalf("another holder: got %v, left %s, %v, %v", got, left, cur, err)
	}
	if ok, _, err := f.st.Lease(bg, op.Ref(), "job:x", "h2", time.Minute); err != nil || ok {
		t.Fatalf("the lease is not held: %v %v", ok, err)
	}
	gone := approval.Ref{Principal: "agent", Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"}
	if got, _, _, err := f.st.LeaseAndGet(bg, gone, "job:x", "h1", time.Minute); !got || approval.ErrorCode(err) != approval.CodeNotFound {
		t.Fatalf("missing operation: got %v, %v", got, err)
	}
}

// TestReadStandingIsRead: the long-poll's read says where the operation
// stands as a full read does, gives the full operation from the same
// reply, and counts against the request rate like Read.
func TestReadStandingIsRead(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	f.send(op)
	// create and send counted 2 requests; 4 a minute leaves 2 reads
	sd, full, err := f.st.ReadStanding(bg, op.Ref(), 4)
	if err != nil {
		t.Fatal(err)
	}
	cur := f.get(op)
	want := approval.Standing{Principal: cur.Principal, Status: cur.Status, Version: cur.Version, ExpiresAt: cur.ExpiresAt}
	if sd != want {
		t.Fatalf("standing = %+v, want %+v", sd, want)
	}
	if got, err := full(); err != nil || !reflect.DeepEqual(got, cur) {
		t.Fatalf("full = %+v, %v; want %+v", got, err, cur)
	}
	if _, err := f.st.Read(bg, op.Ref(), 4); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.st.ReadStanding(bg, op.Ref(), 4); approval.ErrorCode(err) != approval.CodeRateLimited {
		t.Fatalf("fifth request of 4 a minute: %v", err)
	}
	if _, _, err := f.st.ReadStanding(bg, approval.Ref{Principal: "agent", Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, 100); approval.ErrorCode(err) != approval.CodeNotFound {
		t.Fatalf("missing: %v", err)
	}
}
