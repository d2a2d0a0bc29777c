package store_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// TestScriptsOnACluster runs the scripts that take extra KEYS or discover
// keys at run time on a real Redis Cluster, which answers CROSSSLOT (or
// "key … not in this slot") to a script whose keys leave its slot; the
// embedded Redis never does. It runs when REDIS_CLUSTER_URL names a
// cluster (.ci/run starts one), and flushes it.
func TestScriptsOnACluster(t *testing.T) {
	url := os.Getenv("REDIS_CLUSTER_URL")
	if url == "" {
		t.Skip("REDIS_CLUSTER_URL is not set")
	}
	rdb, err := store.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("REDIS_CLUSTER_URL opened a %T, not a cluster client", rdb)
	}
	if err := cc.ForEachMaster(bg, func(ctx context.Context, c *redis.Client) error { return c.FlushDB(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	f := newFixtureOn(t, rdb)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// create.lua with its idempotency binding (KEYS[11]), then its retry.
	for _, p := range []string{"agent", "billing.bot-2", "dev-agent"} {
		op, err := f.create(p, 10, "k-"+p)
		must("create "+p, err)
		_, err = f.create(p, 10, "k-"+p)
		if _, bound := err.(*approval.Bound); !bound || err == nil {
			t.Fatalf("a second create with key k-%s: %v, want bound to %s", p, err, op.Key)
		}
	}
	// create.lua releasing the bytes of another principal of its shard
	// (the gone index names it): an ended operation whose keys expired.
	gone := f.draft("agent", 100)
	f.send(gone)
	_, _, err = f.st.Cancel(bg, gone.Ref(), approval.Step{Tx: "c", Now: f.now, Event: approval.Event{Time: f.now, Event: "canceled"},
		Retention: time.Millisecond, DraftRetention: time.Minute})
	must("cancel", err)
	f.now = f.now.Add(time.Second)
	f.draft("agent", 10)

	// send.lua spending an allowance, revoke.lua (KEYS[11] both).
	grant := f.pending()
	big := 1e6
	must("allowance", f.st.AddAllowance(bg, approval.Allowance{ID: grant.Key, Principal: "agent", Until: f.now.Add(time.Hour), SumLeft: &big}))
	if op := f.sendSpending(grant.Key, 1); op.Status != approval.StatusApproved {
		t.Fatalf("spent: %s", op.Status)
	}
	if ok, err := f.st.RevokeAllowance(bg, grant.Ref(), step(f.now, "allowance_revoked")); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}

	// undelivered.lua and callback_failed.lua (their leases in KEYS[11]).
	op := f.pending()
	if n, _, err := f.st.FailDelivery(bg, op.Ref(), "j1", 0, approval.Event{Time: f.now, Event: "delivery_failed"}); err != nil || n != 1 {
		t.Fatalf("fail delivery: %d %v", n, err)
	}
	if n, _, err := f.st.FailCallback(bg, op.Ref(), f.now, 0); err != nil || n != 1 {
		t.Fatalf("fail callback: %d %v", n, err)
	}

	// The lease scripts, on an operation's lease and on the audit lease.
	if ok, _, got, err := f.st.LeaseAndGet(bg, op.Ref(), "job:x", "a", time.Minute); err != nil || !ok || got == nil {
		t.Fatalf("lease and get: %v %v %v", ok, got, err)
	}
	if ok, err := f.st.RenewLease(bg, op.Ref(), "job:x", "a", time.Minute); err != nil || !ok {
		t.Fatalf("renew: %v %v", ok, err)
	}
	must("unlease", f.st.Unlease(bg, op.Ref(), "job:x", "a"))
	if ok, err := f.st.AuditLease(bg, "a", time.Minute); err != nil || !ok {
		t.Fatalf("audit lease: %v %v", ok, err)
	}
	must("audit release", f.st.AuditRelease(bg, "a"))

	// expiring.lua (Stats) and sweep.lua discover operations in every shard.
	s, err := f.st.Stats(bg, []string{"agent"}, f.now, 2*time.Hour)
	must("stats", err)
	if s.ExpiringSoon < 1 {
		t.Fatalf("expiring soon: %d", s.ExpiringSoon)
	}
	evs, err := f.st.SweepExpired(bg, f.now.Add(3*time.Hour), approval.SweepTransition{Retention: time.Hour, DraftRetention: time.Minute,
		Event: approval.Event{Event: "expired", Actor: "system", Status: approval.StatusExpired}})
	must("sweep", err)
	if len(evs) < 5 {
		t.Fatalf("swept %d", len(evs))
	}
	if cur := f.get(op); cur.Status != approval.StatusExpired {
		t.Fatalf("after the sweep: %s", cur.Status)
	}
}
