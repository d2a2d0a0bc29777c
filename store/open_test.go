package store_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// A cluster client re-reads the slot map every 2 s, so the shards of a
// master that died are served by its promoted replica within seconds, not
// after go-redis's default minute (TestClusterMasterKilled measures it).
func TestClusterClientsReloadTheSlotMapSoon(t *testing.T) {
	for _, raw := range []string{"redis://127.0.0.1:7001,127.0.0.1:7002", "127.0.0.1:7001,127.0.0.1:7002"} {
		rdb, err := store.Open(raw)
		if err != nil {
			t.Fatal(err)
		}
		cc, ok := rdb.(*redis.ClusterClient)
		if !ok {
			t.Fatalf("%s opened a %T", raw, rdb)
		}
		if got := cc.Options().ClusterStateReloadInterval; got != 2*time.Second {
			t.Errorf("%s: slot map reloaded every %s", raw, got)
		}
		_ = cc.Close()
	}
}
