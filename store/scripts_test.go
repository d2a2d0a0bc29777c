package store_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/faultproxy"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// Each transition script, tested where it lives: against the real Redis of
// REDIS_URL (and the embedded one otherwise).

var bg = context.Background()

type fixture struct {
	t   *testing.T
	st  *store.Redis
	rdb redis.UniversalClient
	now time.Time
	q   approval.Quotas
}

func newFixture(t *testing.T) *fixture {
	return newFixtureOn(t, redistest.Start(t).Client(t))
}

func newFixtureOn(t *testing.T, rdb redis.UniversalClient) *fixture {
	st := store.New(rdb, nil)
	t.Cleanup(func() { _ = st.Close() })
	return &fixture{t: t, st: st, rdb: rdb, now: time.Now().UTC().Truncate(time.Millisecond),
		q: approval.Quotas{MaxDrafts: 100, MaxPending: 100, MaxStoredBytes: 1 << 30, RequestsPerMinute: 1e6, SendsPerMinute: 1e6}}
}

func step(now time.Time, name string) approval.Step {
	return approval.Step{Tx: approval.RandomToken(8), Now: now, Event: approval.Event{Time: now, Event: name, Actor: "test"},
		Retention: time.Hour, DraftRetention: time.Minute}
}

// draft stores a new draft of principal p (with input of n bytes) and returns it.
func (f *fixture) draft(p string, n int) *approval.Operation {
	f.t.Helper()
	op, err := f.create(p, n, "")
	if err != nil {
		f.t.Fatalf("create: %v", err)
	}
	return op
}

// noise is n characters that do not compress, so that what a test stores
// is what it counts.
func noise(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}

func (f *fixture) create(p string, n int, idem string) (*approval.Operation, error) {
	in, _ := json.Marshal(map[string]string{"text": noise(n)})
	op := &approval.Operation{Key: approval.NewOperationKey(), Action: "test.effect", Principal: p, Input: in,
		PayloadHash: "sha256:" + approval.RandomToken(16), IdempotencyKey: idem, CreatedAt: f.now,
		Route:  approval.Route{Name: "r", Approvers: []string{"grace", "ada"}, Required: 2, ApprovalTTL: time.Hour},
		Status: approval.StatusDraft, ExpiresAt: f.now.Add(15 * time.Minute), UpdatedAt: f.now,
		Preview: approval.Preview{Title: "t", Fields: []approval.Field{}}}
	err := f.st.Create(bg, op, approval.CreateTransition{Step: step(f.now, "prepared"), TTL: time.Hour, Quotas: f.q})
	return op, err
}

func (f *fixture) send(op *approval.Operation) approval.Status {
	f.t.Helper()
	before, _, err := f.st.Send(bg, op.Ref(), approval.SendTransition{Step: step(f.now, "sent"),
		ExpiresAt: f.now.Add(time.Hour), TTL: 2 * time.Hour, Quotas: f.q})
	if err != nil {
		f.t.Fatalf("send: %v", err)
	}
	return before
}

func (f *fixture) approve(op *approval.Operation, who string) approval.DecideResult {
	f.t.Helper()
	res, err := f.st.Decide(bg, op.Ref(), f.decision(op, who, true))
	if err != nil {
		f.t.Fatalf("decide: %v", err)
	}
	return res
}

func (f *fixture) decision(op *approval.Operation, who string, approve bool) approval.DecideTransition {
	return approval.DecideTransition{Step: step(f.now, "approval"), Approve: approve, Required: op.Route.Required,
		Decision: approval.Decision{Approver: who, Via: "test", At: f.now, PayloadHash: op.PayloadHash}}
}

func (f *fixture) get(op *approval.Operation) *approval.Operation {
	f.t.Helper()
	cur, err := f.st.Get(bg, op.Ref())
	if err != nil {
		f.t.Fatalf("get: %v", err)
	}
	return cur
}

func (f *fixture) usage(p string) store.Usage {
	f.t.Helper()
	u, err := f.st.Usage(bg, p)
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

func (f *fixture) keys() int {
	f.t.Helper()
	n, err := f.rdb.DBSize(bg).Result()
	if err != nil {
		f.t.Fatal(err)
	}
	return int(n)
}

func code(err error) approval.Code { return approval.ErrorCode(err) }

func TestCreateCountsDraftsAndBytes(t *testing.T) {
	f := newFixture(t)
	f.q.MaxDrafts = 3
	for range 3 {
		f.draft("agent", 100)
	}
	if u := f.usage("agent"); u.Drafts != 3 || u.StoredBytes < 300 {
		t.Fatalf("usage = %+v", u)
	}
	keys := f.keys()
	_, err := f.create("agent", 100, "")
	if code(err) != approval.CodeQuotaExceeded || err.(*approval.Error).Details["quota"] != "max_drafts" {
		t.Fatalf("4th draft: %v", err)
	}
	if f.keys() != keys {
		t.Fatalf("a refused draft stored keys: %d → %d", keys, f.keys())
	}
	// Another principal has its own quota.
	f.draft("other", 100)

	f.q.MaxDrafts, f.q.MaxStoredBytes = 100, f.usage("agent").StoredBytes+500
	if _, err := f.create("agent", 2000, ""); code(err) != approval.CodeQuotaExceeded ||
		err.(*approval.Error).Details["quota"] != "max_stored_bytes" {
		t.Fatalf("over bytes: %v", err)
	}
}

func TestCreateRateLimit(t *testing.T) {
	f := newFixture(t)
	f.q.RequestsPerMinute = 5
	for range 5 {
		f.draft("agent", 10)
	}
	_, err := f.create("agent", 10, "")
	if code(err) != approval.CodeRateLimited {
		t.Fatalf("6th create: %v", err)
	}
	if s, _ := err.(*approval.Error).Details["retry_after_seconds"].(int); s < 1 || s > 60 {
		t.Fatalf("retry_after_seconds = %v", err.(*approval.Error).Details)
	}
	if u := f.usage("agent"); u.Drafts != 5 {
		t.Fatalf("drafts = %d", u.Drafts)
	}
}

func TestCreateTooLargeForItsRequestStoresNothing(t *testing.T) {
	f := newFixture(t)
	op := &approval.Operation{Key: approval.NewOperationKey(), Action: "a", Principal: "agent",
		Input: json.RawMessage(`"` + string(make([]byte, 0)) + `"`), PayloadHash: "sha256:x", CreatedAt: f.now,
		Status: approval.StatusDraft, ExpiresAt: f.now.Add(time.Minute),
		Preview: approval.Preview{Title: "t", Summary: noise(5000)}}
	err := f.st.Create(bg, op, approval.CreateTransition{Step: step(f.now, "prepared"), TTL: time.Hour, Quotas: f.q, MaxBytes: 2000})
	if code(err) != approval.CodeInvalidInput || f.keys() != 0 {
		t.Fatalf("err %v, keys %d", err, f.keys())
	}
}

func TestCreateIdempotency(t *testing.T) {
	f := newFixture(t)
	first, err := f.create("agent", 10, "k1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.create("agent", 10, "k1")
	b, ok := err.(*approval.Bound)
	if !ok || b.Operation != first.Key || b.PayloadHash != first.PayloadHash {
		t.Fatalf("second create with the key: %v", err)
	}
	// The same key of another principal is another binding.
	if _, err := f.create("other", 10, "k1"); err != nil {
		t.Fatal(err)
	}
	if u := f.usage("agent"); u.Drafts != 1 {
		t.Fatalf("drafts = %d", u.Drafts)
	}
}

// A create whose reply was lost is sent again with the same transition id:
// it must read as created, not as someone else's key.
func TestCreateRetriedIsCreated(t *testing.T) {
	f := newFixture(t)
	op, err := f.create("agent", 10, "k")
	if err != nil {
		t.Fatal(err)
	}
	tr := approval.CreateTransition{Step: step(f.now, "prepared"), TTL: time.Hour, Quotas: f.q}
	tr.Tx = "same"
	op2 := *op
	op2.Key, op2.IdempotencyKey = approval.NewOperationKey(), ""
	if err := f.st.Create(bg, &op2, tr); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Create(bg, &op2, tr); err != nil {
		t.Fatalf("retried create: %v", err)
	}
	if u := f.usage("agent"); u.Drafts != 2 {
		t.Fatalf("a retried create counted twice: %d drafts", u.Drafts)
	}
}

func TestSendMovesQuotaFromDraftsToPending(t *testing.T) {
	f := newFixture(t)
	f.q.MaxPending = 2
	ops := []*approval.Operation{f.draft("agent", 10), f.draft("agent", 10), f.draft("agent", 10)}
	f.send(ops[0])
	if before := f.send(ops[0]); before != approval.StatusPending {
		t.Fatalf("send again: before = %s", before)
	}
	f.send(ops[1])
	if u := f.usage("agent"); u.Drafts != 1 || u.Pending != 2 {
		t.Fatalf("usage = %+v", u)
	}
	_, _, err := f.st.Send(bg, ops[2].Ref(), approval.SendTransition{Step: step(f.now, "sent"),
		ExpiresAt: f.now.Add(time.Hour), TTL: 2 * time.Hour, Quotas: f.q})
	if code(err) != approval.CodeQuotaExceeded {
		t.Fatalf("3rd pending: %v", err)
	}
	if f.get(ops[2]).Status != approval.StatusDraft {
		t.Fatal("a refused send moved the draft")
	}
	// Ending one frees its place.
	if _, moved, err := f.st.Cancel(bg, ops[0].Ref(), step(f.now, "canceled")); err != nil || !moved {
		t.Fatalf("cancel: %v %v", moved, err)
	}
	f.send(ops[2])
}

// A send whose reply was lost is retried with its transition id; a
// delivery recorded in between (the workers notify at once) must not make
// the retry look like somebody else's send.
func TestSendRetriedAfterADeliveryIsRecognised(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	sent := approval.SendTransition{Step: step(f.now, "sent"), ExpiresAt: f.now.Add(time.Hour), TTL: 2 * time.Hour, Quotas: f.q}
	if before, _, err := f.st.Send(bg, op.Ref(), sent); err != nil || before != approval.StatusDraft {
		t.Fatalf("send: %s %v", before, err)
	}
	d := approval.Delivery{Job: "email:grace", Channel: "email", To: "grace", At: f.now}
	if ok, _, err := f.st.RecordDelivery(bg, op.Ref(), d, approval.Event{Time: f.now, Event: "notified", Actor: "system"}); err != nil || !ok {
		t.Fatalf("record delivery: %v %v", ok, err)
	}
	if before, _, err := f.st.Send(bg, op.Ref(), sent); err != nil || before != approval.StatusDraft {
		t.Fatalf("the retried send answered %s %v; want it recognised as the send that ran (draft before)", before, err)
	}
}

func TestSendRateLimit(t *testing.T) {
	f := newFixture(t)
	f.q.SendsPerMinute = 2
	for i := range 3 {
		op := f.draft("agent", 10)
		_, _, err := f.st.Send(bg, op.Ref(), approval.SendTransition{Step: step(f.now, "sent"),
			ExpiresAt: f.now.Add(time.Hour), TTL: 2 * time.Hour, Quotas: f.q})
		if (i < 2) != (err == nil) || (i == 2 && code(err) != approval.CodeRateLimited) {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

func TestSendWakesTheWorkers(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	f.send(op)
	got := make(chan approval.Task, 1)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	go f.st.Consume(ctx, "c", 1, func(_ context.Context, task approval.Task) error {
		select {
		case got <- task:
		default:
		}
		return nil
	})
	select {
	case task := <-got:
		if task.Ref != op.Ref() {
			t.Fatalf("task for %v, want %v", task.Ref, op.Ref())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("send queued no work")
	}
}

func TestCancelDraftReleasesItsBytesAtOnce(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 5000)
	if u := f.usage("agent"); u.StoredBytes < 5000 {
		t.Fatalf("bytes = %d", u.StoredBytes)
	}
	if _, moved, err := f.st.Cancel(bg, op.Ref(), step(f.now, "canceled")); err != nil || !moved {
		t.Fatal(moved, err)
	}
	if u := f.usage("agent"); u.StoredBytes != 0 || u.Drafts != 0 {
		t.Fatalf("after cancel: %+v", u)
	}
	cur := f.get(op)
	if cur.Status != approval.StatusCanceled || len(cur.Input) != 0 {
		t.Fatalf("canceled draft: %s, input %d bytes", cur.Status, len(cur.Input))
	}
	if ttl := f.rdb.PTTL(bg, "cs:"+tagOf(f, op)+":o:"+op.Key).Val(); ttl > time.Minute || ttl <= 0 {
		t.Fatalf("a canceled draft is kept %s, want the draft retention (1m here)", ttl)
	}
}

func tagOf(f *fixture, op *approval.Operation) string {
	for _, k := range f.rdb.Keys(bg, "cs:*:o:"+op.Key).Val() {
		return k[len("cs:") : len(k)-len(":o:"+op.Key)]
	}
	f.t.Fatal("no key")
	return ""
}

func TestDecideQuorumAndRetry(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	f.send(op)
	tr := f.decision(op, "grace", true)
	if res, err := f.st.Decide(bg, op.Ref(), tr); err != nil || res.Outcome != approval.DecideRecorded {
		t.Fatalf("grace: %v %v", res, err)
	}
	// The same call again (its reply was lost) is still "recorded".
	if res, err := f.st.Decide(bg, op.Ref(), tr); err != nil || res.Outcome != approval.DecideRecorded {
		t.Fatalf("grace retried: %v %v", res, err)
	}
	// Another decision of grace is refused.
	if res := f.approve(op, "grace"); res.Outcome != approval.DecideAlreadyDecided {
		t.Fatalf("grace again: %v", res)
	}
	// A wrong payload hash never counts.
	bad := f.decision(op, "ada", true)
	bad.Decision.PayloadHash = "sha256:other"
	if res, _ := f.st.Decide(bg, op.Ref(), bad); res.Outcome != approval.DecideHashMismatch {
		t.Fatalf("wrong hash: %v", res)
	}
	if res := f.approve(op, "ada"); res.Outcome != approval.DecideApproved || res.Status != approval.StatusApproved {
		t.Fatalf("ada: %v", res)
	}
	if cur := f.get(op); len(cur.Approvals) != 2 || cur.Status != approval.StatusApproved {
		t.Fatalf("after quorum: %s, %d approvals", cur.Status, len(cur.Approvals))
	}
}

func TestDecideWithUnknownLinkIsRefused(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	f.send(op)
	if ok, err := f.st.AddCapability(bg, op.Ref(), "n1", approval.Capability{Approver: "grace", Channel: "email", Expires: f.now.Add(time.Hour)}, f.now); err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, c := range []struct{ who, nonce string }{{"grace", "n2"}, {"ada", "n1"}} {
		tr := f.decision(op, c.who, true)
		tr.NonceHash = c.nonce
		if res, _ := f.st.Decide(bg, op.Ref(), tr); res.Outcome != approval.DecideUnknownLink {
			t.Fatalf("%s with %s: %v", c.who, c.nonce, res)
		}
	}
	tr := f.decision(op, "grace", true)
	tr.NonceHash = "n1"
	if res, _ := f.st.Decide(bg, op.Ref(), tr); res.Outcome != approval.DecideRecorded {
		t.Fatalf("grace with her link: %v", res)
	}
}

func TestRejectEndsAndReleasesPending(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	f.send(op)
	res, err := f.st.Decide(bg, op.Ref(), f.decision(op, "grace", false))
	if err != nil || res.Outcome != approval.DecideRejected {
		t.Fatal(res, err)
	}
	if u := f.usage("agent"); u.Pending != 0 {
		t.Fatalf("pending = %d", u.Pending)
	}
	if res := f.approve(op, "ada"); res.Outcome != approval.DecideNotPending {
		t.Fatalf("after rejection: %v", res)
	}
}

func approved(f *fixture) *approval.Operation {
	op := f.draft("agent", 10)
	f.send(op)
	f.approve(op, "grace")
	f.approve(op, "ada")
	return op
}

func claim(now time.Time, token string) approval.ClaimTransition {
	return approval.ClaimTransition{Step: step(now, "executing"), Token: token}
}

func TestClaimHasOneWinner(t *testing.T) {
	f := newFixture(t)
	op := approved(f)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, _, err := f.st.Claim(bg, op.Ref(), claim(f.now, approval.RandomToken(8)))
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d claims won", won)
	}
}

// A claim whose reply comes back after the client gave up is sent again by
// go-redis. The operation is then already executing: the winner's retry
// must read as won, or nobody ever runs it.
func TestClaimAnsweredLateIsStillWon(t *testing.T) {
	f := newFixture(t)
	op := approved(f)
	opt := f.rdb.(*redis.Client).Options()
	proxy, err := faultproxy.Start(opt.Addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: opt.DB, ReadTimeout: 200 * time.Millisecond,
		MaxRetries: 3, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond})
	defer slow.Close()
	st := store.New(slow, nil)
	defer st.Close()
	if err := st.Ping(bg); err != nil {
		t.Fatal(err)
	}
	proxy.Hold(1, 600*time.Millisecond) // the claim's reply is late
	tr := claim(f.now, "mine")
	ok, status, err := st.Claim(bg, op.Ref(), tr)
	if err != nil || !ok {
		t.Fatalf("claim answered late: won %v (%s), %v; held %d replies", ok, status, err, proxy.Stats().Held)
	}
	if proxy.Stats().Held != 1 {
		t.Fatal("the reply was not held back: the test proves nothing")
	}
	// Someone else's claim still loses.
	if ok, _, _ := f.st.Claim(bg, op.Ref(), claim(f.now, "theirs")); ok {
		t.Fatal("a second claimer won too")
	}
	// And the winner's outcome is recorded once, also when sent twice.
	ft := approval.FinishTransition{Step: step(f.now, "succeeded"), Token: "mine", To: approval.StatusSucceeded, Result: []byte(`{"ok":true}`)}
	for range 2 {
		if _, err := f.st.Finish(bg, op.Ref(), ft); err != nil {
			t.Fatal(err)
		}
	}
	if cur := f.get(op); cur.Status != approval.StatusSucceeded {
		t.Fatalf("status %s", cur.Status)
	}
}

func TestFinishOnlyByTheClaimer(t *testing.T) {
	f := newFixture(t)
	op := approved(f)
	if ok, _, err := f.st.Claim(bg, op.Ref(), claim(f.now, "mine")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	ft := approval.FinishTransition{Step: step(f.now, "succeeded"), Token: "theirs", To: approval.StatusSucceeded}
	if _, err := f.st.Finish(bg, op.Ref(), ft); code(err) != approval.CodeInvalidState {
		t.Fatalf("finish by another token: %v", err)
	}
	ft.Token = "mine"
	if _, err := f.st.Finish(bg, op.Ref(), ft); err != nil {
		t.Fatal(err)
	}
	if u := f.usage("agent"); u.Pending != 0 {
		t.Fatalf("pending after finish = %d", u.Pending)
	}
	// An operator cannot settle what has ended.
	if _, moved, _ := f.st.Settle(bg, op.Ref(), approval.SettleTransition{Step: step(f.now, "reconciled"), To: approval.StatusFailed}); moved {
		t.Fatal("settled a succeeded operation")
	}
}

func TestExecutingIndexFindsStuckOperations(t *testing.T) {
	f := newFixture(t)
	op := approved(f)
	if ok, _, err := f.st.Claim(bg, op.Ref(), claim(f.now, "x")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if list, _ := f.st.Executing(bg, f.now.Add(-time.Second), 10); len(list) != 0 {
		t.Fatalf("claimed just now, listed as older: %d", len(list))
	}
	list, err := f.st.Executing(bg, f.now.Add(time.Second), 10)
	if err != nil || len(list) != 1 || list[0].Key != op.Key {
		t.Fatalf("stuck list: %v %v", list, err)
	}
	if _, moved, err := f.st.Settle(bg, op.Ref(), approval.SettleTransition{Step: step(f.now, "reconciled"), To: approval.StatusFailed}); err != nil || !moved {
		t.Fatal(moved, err)
	}
	if list, _ := f.st.Executing(bg, f.now.Add(time.Second), 10); len(list) != 0 {
		t.Fatal("a settled operation is still listed")
	}
}

func TestClaimAfterTheWindowExpires(t *testing.T) {
	f := newFixture(t)
	op := approved(f)
	late := f.now.Add(2 * time.Hour)
	if ok, st, err := f.st.Claim(bg, op.Ref(), claim(late, "x")); ok || st != approval.StatusExpired || err != nil {
		t.Fatalf("late claim: %v %s %v", ok, st, err)
	}
	if u := f.usage("agent"); u.Pending != 0 {
		t.Fatalf("pending = %d", u.Pending)
	}
}

func TestStaleFailsOnlyPending(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	tr := approval.StaleTransition{Step: step(f.now, "stale"), Error: &approval.OpError{Code: approval.CodeStaleState, Message: "changed"}}
	if _, moved, _ := f.st.Stale(bg, op.Ref(), tr); moved {
		t.Fatal("a draft went stale")
	}
	f.send(op)
	if _, moved, err := f.st.Stale(bg, op.Ref(), tr); err != nil || !moved {
		t.Fatal(moved, err)
	}
	if cur := f.get(op); cur.Status != approval.StatusFailed || cur.Error.Code != approval.CodeStaleState {
		t.Fatalf("%s %v", cur.Status, cur.Error)
	}
}

// Expiry costs what is due: the sweep ends exactly the operations past
// their window, releases their quota, and wakes the sent ones so their
// messages are updated.
func TestSweepExpiresWhatIsDue(t *testing.T) {
	f := newFixture(t)
	var drafts, pending []*approval.Operation
	for range 5 {
		drafts = append(drafts, f.draft("agent", 100))
	}
	for range 3 {
		op := f.draft("agent", 100)
		f.send(op)
		pending = append(pending, op)
	}
	keep := f.draft("agent", 100)
	// The drafts' window ends in 15 min, the pending ones' in 1 h.
	sw := approval.SweepTransition{Retention: time.Hour, DraftRetention: time.Minute,
		Event: approval.Event{Event: "expired", Actor: "system", Status: approval.StatusExpired}}
	evs, err := f.st.SweepExpired(bg, f.now.Add(20*time.Minute), sw)
	if err != nil || len(evs) != 6 { // 5 drafts and keep
		t.Fatalf("swept %d, %v", len(evs), err)
	}
	if u := f.usage("agent"); u.Drafts != 0 || u.Pending != 3 {
		t.Fatalf("usage after the drafts' expiry: %+v", u)
	}
	for _, op := range append(drafts, keep) {
		if cur := f.get(op); cur.Status != approval.StatusExpired || cur.Input != nil {
			t.Fatalf("draft %s: %s, %d input bytes", op.Key, cur.Status, len(cur.Input))
		}
	}
	if evs, _ := f.st.SweepExpired(bg, f.now.Add(20*time.Minute), sw); len(evs) != 0 {
		t.Fatalf("swept again: %d", len(evs))
	}
	evs, _ = f.st.SweepExpired(bg, f.now.Add(2*time.Hour), sw)
	if len(evs) != 3 || evs[0].PayloadHash == "" {
		t.Fatalf("pending expiry: %v", evs)
	}
	if u := f.usage("agent"); u.Pending != 0 {
		t.Fatalf("pending = %d", u.Pending)
	}
}

// The bytes of an ended operation are released when its keys are deleted.
func TestBytesAreReleasedWhenKeysExpire(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 1000)
	f.send(op)
	st := approval.Step{Tx: "c", Now: f.now, Event: approval.Event{Time: f.now, Event: "canceled"},
		Retention: 50 * time.Millisecond, DraftRetention: time.Minute}
	if _, moved, err := f.st.Cancel(bg, op.Ref(), st); err != nil || !moved {
		t.Fatal(moved, err)
	}
	if u := f.usage("agent"); u.StoredBytes < 1000 {
		t.Fatalf("a sent operation's bytes were released at its end: %d", u.StoredBytes)
	}
	// The next create reclaims what was deleted since.
	f.now = f.now.Add(time.Second)
	f.draft("agent", 10)
	if u := f.usage("agent"); u.StoredBytes > 1500 {
		t.Fatalf("bytes not reclaimed: %d", u.StoredBytes)
	}
}

func TestLeaseHasOneHolder(t *testing.T) {
	f := newFixture(t)
	op := f.draft("agent", 10)
	ok, _, err := f.st.Lease(bg, op.Ref(), "job:x", "a", time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	ok, left, _ := f.st.Lease(bg, op.Ref(), "job:x", "b", time.Minute)
	if ok || left <= 0 {
		t.Fatalf("second holder: %v, %s left", ok, left)
	}
	if renewed, _ := f.st.RenewLease(bg, op.Ref(), "job:x", "b", time.Minute); renewed {
		t.Fatal("b renewed a's lease")
	}
	_ = f.st.Unlease(bg, op.Ref(), "job:x", "b") // not b's to drop
	if ok, _, _ := f.st.Lease(bg, op.Ref(), "job:x", "b", time.Minute); ok {
		t.Fatal("b dropped a's lease")
	}
	_ = f.st.Unlease(bg, op.Ref(), "job:x", "a")
	if ok, _, _ := f.st.Lease(bg, op.Ref(), "job:x", "b", time.Minute); !ok {
		t.Fatal("released lease not free")
	}
}

func TestGetByKeyAloneFindsTheShard(t *testing.T) {
	f := newFixture(t)
	op := f.draft("someone.else", 10)
	cur, err := f.st.Get(bg, approval.Ref{Key: op.Key})
	if err != nil || cur.Principal != "someone.else" {
		t.Fatalf("located %v, %v", cur, err)
	}
	if _, err := f.st.Get(bg, approval.Ref{Key: approval.NewOperationKey()}); code(err) != approval.CodeNotFound {
		t.Fatalf("unknown key: %v", err)
	}
}
