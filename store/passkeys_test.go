package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// The passkey scripts, on real Redis (REDIS_URL) and the embedded one.

func TestEnrolUsesTheLinkOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.st.AddEnrolment(ctx, "grace", "n1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if live, err := f.st.Enrolment(ctx, "grace", "n1"); err != nil || !live {
		t.Fatalf("live = %v, %v", live, err)
	}
	if live, _ := f.st.Enrolment(ctx, "ada", "n1"); live {
		t.Fatal("grace's link is live for ada")
	}
	c := approval.PasskeyCredential{ID: []byte("cred-1"), PublicKey: []byte("cose"), SignCount: 3, BackupEligible: true, Created: f.now}
	if ok, err := f.st.Enrol(ctx, "grace", "n1", c); err != nil || !ok {
		t.Fatalf("enrol = %v, %v", ok, err)
	}
	if ok, err := f.st.Enrol(ctx, "grace", "n1", approval.PasskeyCredential{ID: []byte("cred-2")}); err != nil || ok {
		t.Fatalf("second enrol with the same link = %v, %v", ok, err)
	}
	if live, _ := f.st.Enrolment(ctx, "grace", "n1"); live {
		t.Fatal("the link is still live")
	}
	// A credential already enrolled is refused and leaves the new link live.
	_ = f.st.AddEnrolment(ctx, "grace", "n2", time.Hour)
	if _, err := f.st.Enrol(ctx, "grace", "n2", c); code(err) != approval.CodeInvalidState {
		t.Fatalf("re-enrolling: %v", err)
	}
	if live, _ := f.st.Enrolment(ctx, "grace", "n2"); !live {
		t.Fatal("a refused enrolment used the link up")
	}
	got, err := f.st.PasskeyCredentials(ctx, "grace")
	if err != nil || len(got) != 1 {
		t.Fatalf("credentials = %+v, %v", got, err)
	}
	if string(got[0].ID) != "cred-1" || string(got[0].PublicKey) != "cose" || got[0].SignCount != 3 || !got[0].BackupEligible {
		t.Errorf("credential = %+v", got[0])
	}
	if none, _ := f.st.PasskeyCredentials(ctx, "ada"); len(none) != 0 {
		t.Errorf("ada has %d passkeys", len(none))
	}
}

func TestEnrolmentExpires(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_ = f.st.AddEnrolment(ctx, "grace", "n1", 50*time.Millisecond)
	time.Sleep(120 * time.Millisecond) // keys expire in real time on both servers
	if live, _ := f.st.Enrolment(ctx, "grace", "n1"); live {
		t.Fatal("an expired link is live")
	}
}

func TestSignCountOnlyMovesForward(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_ = f.st.AddEnrolment(ctx, "grace", "n1", time.Hour)
	id := []byte("cred-1")
	if ok, err := f.st.Enrol(ctx, "grace", "n1", approval.PasskeyCredential{ID: id, SignCount: 5}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for _, tc := range []struct {
		count uint32
		want  approval.PasskeyResult
	}{{5, approval.PasskeyRegression}, {4, approval.PasskeyRegression}, {6, approval.PasskeyUsed}, {6, approval.PasskeyRegression}, {100, approval.PasskeyUsed}} {
		if got, err := f.st.UsePasskey(ctx, "grace", id, tc.count); err != nil || got != tc.want {
			t.Errorf("count %d: %s, %v; want %s", tc.count, got, err, tc.want)
		}
	}
	if got, _ := f.st.UsePasskey(ctx, "grace", []byte("other"), 7); got != approval.PasskeyUnknown {
		t.Errorf("unknown credential: %s", got)
	}
	if got, _ := f.st.UsePasskey(ctx, "ada", id, 700); got != approval.PasskeyUnknown {
		t.Errorf("grace's passkey for ada: %s", got)
	}
	// An authenticator without a counter (0 and 0) may sign again.
	_ = f.st.AddEnrolment(ctx, "ada", "n2", time.Hour)
	_, _ = f.st.Enrol(ctx, "ada", "n2", approval.PasskeyCredential{ID: id})
	for range 2 {
		if got, _ := f.st.UsePasskey(ctx, "ada", id, 0); got != approval.PasskeyUsed {
			t.Errorf("counterless: %s", got)
		}
	}
}

// Two assertions with the same counter at once: exactly one is used.
func TestSignCountRace(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_ = f.st.AddEnrolment(ctx, "grace", "n1", time.Hour)
	_, _ = f.st.Enrol(ctx, "grace", "n1", approval.PasskeyCredential{ID: []byte("c"), SignCount: 1})
	var mu sync.Mutex
	used := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := f.st.UsePasskey(ctx, "grace", []byte("c"), 2); err == nil && got == approval.PasskeyUsed {
				mu.Lock()
				used++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if used != 1 {
		t.Fatalf("%d of 8 identical assertions were used, want 1", used)
	}
}

func TestSessionsAndSignIns(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.st.PutSession(ctx, "h1", []byte(`{"a":"grace"}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if b, err := f.st.Session(ctx, "h1"); err != nil || string(b) != `{"a":"grace"}` {
		t.Fatalf("session = %q, %v", b, err)
	}
	if b, _ := f.st.Session(ctx, "h2"); b != nil {
		t.Fatal("an unknown session exists")
	}
	_ = f.st.DropSession(ctx, "h1")
	if b, _ := f.st.Session(ctx, "h1"); b != nil {
		t.Fatal("a dropped session exists")
	}
	_ = f.st.PutSignIn(ctx, "s1", []byte("state"), time.Minute)
	if b, _ := f.st.TakeSignIn(ctx, "s1"); string(b) != "state" {
		t.Fatalf("take = %q", b)
	}
	if b, _ := f.st.TakeSignIn(ctx, "s1"); b != nil {
		t.Fatal("a sign-in state was read twice")
	}
}

func TestLiveAndNote(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := f.draft("agent-a", 10)
	b := f.draft("agent-b", 10)
	f.send(b)
	ops, err := f.st.Live(ctx, 100)
	if err != nil || len(ops) != 2 {
		t.Fatalf("live = %d, %v", len(ops), err)
	}
	_, _, err = f.st.Cancel(ctx, a.Ref(), step(f.now, "canceled"))
	if err != nil {
		t.Fatal(err)
	}
	if ops, _ := f.st.Live(ctx, 100); len(ops) != 1 || ops[0].Key != b.Key {
		t.Fatalf("after cancel: %d live", len(ops))
	}
	before := f.get(b)
	ev := approval.Event{Time: f.now, Operation: b.Key, Event: "step_up_refused", Actor: "approver:grace", Channel: "slack",
		PayloadHash: b.PayloadHash, Outcome: "missing"}
	if err := f.st.Note(ctx, approval.Ref{Key: b.Key}, ev); err != nil {
		t.Fatal(err)
	}
	after := f.get(b)
	if after.Version != before.Version || after.Status != before.Status {
		t.Errorf("a note changed the operation: v%d→v%d", before.Version, after.Version)
	}
	evs, _ := f.st.Events(ctx, b.Ref())
	if last := evs[len(evs)-1]; last.Event != "step_up_refused" || last.Outcome != "missing" || last.PayloadHash != b.PayloadHash {
		t.Errorf("last event %+v", last)
	}
	if err := f.st.Note(ctx, approval.Ref{Key: approval.NewOperationKey()}, ev); code(err) != approval.CodeNotFound {
		t.Errorf("note on nothing: %v", err)
	}
}

// The route's step_up is stored with the operation (codec field "s").
func TestStepUpRouteIsStored(t *testing.T) {
	f := newFixture(t)
	op := &approval.Operation{Key: approval.NewOperationKey(), Action: "test.effect", Principal: "p", Input: []byte(`{}`),
		PayloadHash: "sha256:" + approval.RandomToken(16), CreatedAt: f.now,
		Route:  approval.Route{Name: "r", Approvers: []string{"grace"}, Required: 1, ApprovalTTL: time.Hour, StepUp: approval.StepUpPasskey},
		Status: approval.StatusDraft, ExpiresAt: f.now.Add(time.Minute), UpdatedAt: f.now, Preview: approval.Preview{Fields: []approval.Field{}}}
	if err := f.st.Create(bg, op, approval.CreateTransition{Step: step(f.now, "prepared"), TTL: time.Hour, Quotas: f.q}); err != nil {
		t.Fatal(err)
	}
	if got := f.get(op).Route.StepUp; got != approval.StepUpPasskey {
		t.Fatalf("step_up = %q", got)
	}
}
