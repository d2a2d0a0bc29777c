package store_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// replicated starts a master with one replica (real redis-server
// processes) and a fixture on the master whose transitions wait for the
// replica.
func replicated(t *testing.T) (f *fixture, master, replica *redistest.Process) {
	t.Helper()
	master = redistest.StartProcess(t, "--repl-diskless-sync-delay", "0")
	replica = redistest.StartProcess(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	mc := redistest.Client(t, master.URL())
	waitFor(t, "the replica to sync", func() bool {
		info, _ := mc.Info(bg, "replication").Result()
		if !strings.Contains(info, "connected_slaves:1") || !strings.Contains(info, "state=online") {
			return false
		}
		// and it acknowledges writes
		n, _ := mc.Pipelined(bg, func(p redis.Pipeliner) error {
			p.Incr(bg, "sync")
			p.Do(bg, "WAIT", 1, 200)
			return nil
		})
		return len(n) == 2 && n[1].(*redis.Cmd).Val() == int64(1)
	})
	f = newFixtureOn(t, mc)
	f.st.SetDurability(store.Durability{Replicas: 1, Timeout: 500 * time.Millisecond})
	return f, master, replica
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outcomeUnknown reports whether err is 503 unavailable with
// details.outcome_unknown, as an agent sees it.
func outcomeUnknown(err error) bool {
	var ae *approval.Error
	return errors.As(err, &ae) && ae.Code == approval.CodeUnavailable && ae.Details["outcome_unknown"] == true
}

// A transition is acknowledged only once the replica has it: with the
// replica up, what create, send and decide acknowledged is readable on the
// replica at once; with the replica stalled, create answers unavailable
// with outcome_unknown (it applied on the master, and may not survive a
// failover) instead of "created".
func TestTransitionsAreAcknowledgedOnlyOnceOnTheReplica(t *testing.T) {
	f, _, replica := replicated(t)
	onReplica := store.New(redistest.Client(t, replica.URL()), nil)
	t.Cleanup(func() { _ = onReplica.Close() })

	op := f.draft("agent", 10)
	f.send(op)
	f.approve(op, "grace")
	got, err := onReplica.Get(bg, op.Ref())
	if err != nil {
		t.Fatalf("the acknowledged operation is not on the replica: %v", err)
	}
	if got.Status != approval.StatusPending || len(got.Approvals) != 1 {
		t.Fatalf("on the replica: %s with %d approvals", got.Status, len(got.Approvals))
	}

	replica.Pause()
	defer replica.Resume()
	_, err = f.create("agent", 10, "")
	if !outcomeUnknown(err) {
		t.Fatalf("create while the replica stalls: %v, want unavailable with outcome_unknown", err)
	}
	var nd *store.NotDurable
	if !errors.As(err, &nd) || nd.Required != 1 || nd.Acked != 0 {
		t.Fatalf("not a NotDurable: %#v", err)
	}
	if _, err := f.st.Decide(bg, op.Ref(), f.decision(op, "ada", true)); !outcomeUnknown(err) {
		t.Fatalf("decide while the replica stalls: %v", err)
	}
}

// A claim whose WAIT fell short is asked again (the executor does, with
// the same token); the script then recognises its own win and writes
// nothing. WAIT on a fresh connection that wrote nothing would answer at
// once that the replica has "everything": the probe write makes the retry
// wait for the replica too, so the effect cannot start on a claim that a
// failover could undo.
func TestClaimAskedAgainOnANewConnectionStillWaitsForTheReplica(t *testing.T) {
	f, master, replica := replicated(t)
	op := approved(f)
	tr := claim(f.now, "mine")

	replica.Pause()
	resumed := false
	defer func() {
		if !resumed {
			replica.Resume()
		}
	}()
	if won, _, err := f.st.Claim(bg, op.Ref(), tr); won || !outcomeUnknown(err) {
		t.Fatalf("claim while the replica stalls: won=%v err=%v", won, err)
	}
	// Another process (a new connection) asks again for the same claim.
	other := store.New(redistest.Client(t, master.URL()), nil)
	t.Cleanup(func() { _ = other.Close() })
	other.SetDurability(f.st.Durability())
	if won, _, err := other.Claim(bg, op.Ref(), tr); won || !outcomeUnknown(err) {
		t.Fatalf("the claim asked again on a new connection: won=%v err=%v; the effect would start before the replica has the claim", won, err)
	}
	replica.Resume()
	resumed = true
	won, _, err := other.Claim(bg, op.Ref(), tr)
	if err != nil || !won {
		t.Fatalf("the claim asked again once the replica is back: won=%v err=%v", won, err)
	}
}

// What the agent is shown must be on the replica: a read while the replica
// stalls answers unavailable rather than a status a failover could take
// back.
func TestAgentReadIsShownOnlyOnceOnTheReplica(t *testing.T) {
	f, _, replica := replicated(t)
	op := f.draft("agent", 10)
	if _, err := f.st.Read(bg, op.Ref(), 1000); err != nil {
		t.Fatal(err)
	}
	replica.Pause()
	defer replica.Resume()
	if _, err := f.st.Read(bg, op.Ref(), 1000); code(err) != approval.CodeUnavailable || outcomeUnknown(err) {
		t.Fatalf("read while the replica stalls: %v; want unavailable (a read has no unknown outcome)", err)
	}
	if _, err := f.st.Get(bg, op.Ref()); code(err) != approval.CodeUnavailable {
		t.Fatalf("get while the replica stalls: %v", err)
	}
	if _, err := f.st.List(bg, "agent", 10); code(err) != approval.CodeUnavailable {
		t.Fatalf("list while the replica stalls: %v", err)
	}
}

// A master whose replica is gone cannot keep a claim through a failover:
// the claim is refused before it runs, and the operation stays approved.
func TestClaimIsRefusedWhenTheMasterHasTooFewReplicas(t *testing.T) {
	f, master, replica := replicated(t)
	op := approved(f)
	replica.Kill()
	mc := redistest.Client(t, master.URL())
	waitFor(t, "the master to see its replica gone", func() bool {
		info, _ := mc.Info(bg, "replication").Result()
		return strings.Contains(info, "connected_slaves:0")
	})
	won, _, err := f.st.Claim(bg, op.Ref(), claim(f.now, "mine"))
	if won || code(err) != approval.CodeUnavailable || outcomeUnknown(err) {
		t.Fatalf("claim without a replica: won=%v err=%v; want unavailable, outcome known (nothing ran)", won, err)
	}
	// (Reads wait for the replica too: look without waiting.)
	if _, err := f.st.Get(bg, op.Ref()); code(err) != approval.CodeUnavailable {
		t.Fatalf("a read without the replica: %v", err)
	}
	f.st = store.New(f.rdb, nil)
	if st := f.get(op).Status; st != approval.StatusApproved {
		t.Fatalf("the refused claim left the operation %s", st)
	}
	waiting := store.New(f.rdb, nil)
	waiting.SetDurability(store.Durability{Replicas: 1})
	if err := waiting.Ready(bg); err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("ready without the replica: %v", err)
	}
}

// A single Redis keeps a claim through a crash only with appendfsync
// always: with everysec, the claim is refused (the operation stays
// approved) until the setting is changed.
func TestClaimOnASingleNodeNeedsFsyncAlways(t *testing.T) {
	p := redistest.StartProcess(t, "--appendonly", "yes", "--appendfsync", "everysec")
	rdb := redistest.Client(t, p.URL())
	f := newFixtureOn(t, rdb)
	f.st.SetDurability(store.Durability{FsyncAlways: true})
	op := approved(f)
	if won, _, err := f.st.Claim(bg, op.Ref(), claim(f.now, "mine")); won || code(err) != approval.CodeUnavailable {
		t.Fatalf("claim with appendfsync everysec: won=%v err=%v", won, err)
	}
	if st := f.get(op).Status; st != approval.StatusApproved {
		t.Fatalf("the refused claim left the operation %s", st)
	}
	if err := rdb.ConfigSet(bg, "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	if won, _, err := f.st.Claim(bg, op.Ref(), claim(f.now, "mine")); !won || err != nil {
		t.Fatalf("claim with appendfsync always: won=%v err=%v", won, err)
	}
}

// COUNTERSIGN_REDIS_MIN_REPLICAS: auto waits for one replica where there is
// one, and refuses to start on a single node that could lose a claim in a
// crash; a number is taken as it is.
func TestConfigureDurability(t *testing.T) {
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	on := func(rdb redis.UniversalClient) *store.Redis {
		st := store.New(rdb, nil)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	f, _, _ := replicated(t)
	if d, _, err := on(f.rdb).ConfigureDurability(ctx, "auto", 0, false); err != nil || d.Replicas != 1 || d.Timeout != store.DefaultWaitTimeout {
		t.Fatalf("auto with a replica: %+v %v", d, err)
	}
	single := redistest.StartProcess(t, "--appendonly", "yes", "--appendfsync", "everysec")
	sc := redistest.Client(t, single.URL())
	if _, _, err := on(sc).ConfigureDurability(ctx, "", 0, false); err == nil || !strings.Contains(err.Error(), "appendfsync always") {
		t.Fatalf("auto on a single node with everysec: %v", err)
	}
	if d, _, err := on(sc).ConfigureDurability(ctx, "", 0, true); err != nil || d.Replicas != 1 {
		t.Fatalf("auto through a Sentinel: %+v %v", d, err)
	}
	if d, w, err := on(sc).ConfigureDurability(ctx, "0", 0, false); err != nil || d.Replicas != 0 || d.FsyncAlways || len(w) != 1 {
		t.Fatalf("0: %+v %v %v", d, w, err)
	}
	if err := sc.ConfigSet(ctx, "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	if d, _, err := on(sc).ConfigureDurability(ctx, "auto", 0, false); err != nil || d.Replicas != 0 || !d.FsyncAlways {
		t.Fatalf("auto on a single node with always: %+v %v", d, err)
	}
	if _, _, err := on(sc).ConfigureDurability(ctx, "two", 0, false); err == nil {
		t.Fatal("a word was taken as a number of replicas")
	}
}

// A process still connected to a master that a failover demoted reads
// that node's old data: what it would show is refused (the probe write
// fails there), never an earlier status than the new master holds.
func TestReadOnADemotedMasterIsRefused(t *testing.T) {
	f, _, replica := replicated(t)
	op := f.draft("agent", 10)
	stale := store.New(redistest.Client(t, replica.URL()), nil)
	t.Cleanup(func() { _ = stale.Close() })
	stale.SetDurability(f.st.Durability())
	if got, err := stale.Get(bg, op.Ref()); code(err) != approval.CodeUnavailable {
		t.Fatalf("read on a replica: %v, %v; want unavailable", got, err)
	}
}
