package web_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/testkit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
)

// TestReadyzTellsRefusingWritesFromUnreachable: /readyz on a real
// redis-server. A Redis that answers but refuses writes is not ready
// (503), and says so with the class of Redis's error: out of memory under
// noeviction (OOM), unable to persist (MISCONF, here a failed RDB save);
// only a Redis that does not answer is "unreachable" (issue 20, item 6).
func TestReadyzTellsRefusingWritesFromUnreachable(t *testing.T) {
	p := redistest.StartProcess(t, "--maxmemory-policy", "noeviction")
	rdb, err := store.Open(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(rdb, nil)
	t.Cleanup(func() { _ = st.Close(); _ = rdb.Close() })
	svc, err := approval.NewService(approval.Config{Store: st, Links: approval.RandomKeyring(), PublicURL: pagePublicURL,
		Policy: &approval.Policy{Approvers: []*approval.Approver{{ID: "grace"}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{Service: svc, Limiter: st, Ready: st.Ready, PublicURL: pagePublicURL})
	if err != nil {
		t.Fatal(err)
	}
	base := testkit.Serve(t, srv.App().Listener, srv.Shutdown)
	c := newClient("")
	readyz := func(wantStatus int, want map[string]string) {
		t.Helper()
		r := c.do(t, "GET", base+"/readyz", nil, nil)
		var got map[string]string
		_ = json.Unmarshal([]byte(r.body), &got)
		if r.status != wantStatus || len(got) != len(want) {
			t.Fatalf("/readyz: %d %s, want %d %v", r.status, r.body, wantStatus, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("/readyz: %d %s, want %d %v", r.status, r.body, wantStatus, want)
			}
		}
	}
	redis := redistest.Client(t, p.URL())
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	readyz(200, map[string]string{"status": "ready"})

	must(redis.ConfigSet(ctx, "maxmemory", "1").Err())
	readyz(503, map[string]string{"status": "unavailable", "store": "refusing_writes", "redis_error": "OOM"})
	must(redis.ConfigSet(ctx, "maxmemory", "0").Err())
	readyz(200, map[string]string{"status": "ready"})

	// MISCONF: a save point, and an RDB save that fails (its file name is
	// taken by a directory, so the rename at its end fails, even for root).
	must(os.Mkdir(filepath.Join(p.Dir, "dump.rdb"), 0o700))
	must(redis.ConfigSet(ctx, "save", "3600 1").Err())
	must(redis.BgSave(ctx).Err())
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, _ := redis.Info(ctx, "persistence").Result()
		if strings.Contains(info, "rdb_last_bgsave_status:err") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the RDB save did not fail:\n%s", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	readyz(503, map[string]string{"status": "unavailable", "store": "refusing_writes", "redis_error": "MISCONF"})
	must(redis.ConfigSet(ctx, "save", "").Err())
	readyz(200, map[string]string{"status": "ready"})

	p.Kill()
	readyz(503, map[string]string{"status": "unavailable", "store": "unreachable"})
}
