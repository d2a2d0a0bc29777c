package store_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
)

// A service outside development mode refuses a Redis that may evict, and
// warns of one that does not persist or that stores operations loosely.
func TestCheckRefusesEvictionAndAdvisesAOFAndCompactHashes(t *testing.T) {
	for _, c := range []struct {
		args  []string
		err   string
		warns []string
	}{
		{[]string{"--maxmemory-policy", "allkeys-lru"}, "noeviction", nil},
		{nil, "", []string{"AOF off", "hash-max-listpack-value 64"}},
		{[]string{"--appendonly", "yes", "--hash-max-listpack-value", "1000"}, "", []string{"hash-max-listpack-value 1000"}},
		{[]string{"--appendonly", "yes", "--hash-max-listpack-value", strconv.Itoa(store.CompactHashValue)}, "", nil},
	} {
		p := redistest.StartProcess(t, c.args...)
		st := store.New(redistest.Client(t, p.URL()), nil)
		warns, err := st.Check(bg)
		_ = st.Close()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: err %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
		}
		if len(warns) != len(c.warns) {
			t.Errorf("%v: warnings %q, want %q", c.args, warns, c.warns)
			continue
		}
		for i, w := range c.warns {
			if !strings.Contains(warns[i], w) {
				t.Errorf("%v: warning %q, want %q in it", c.args, warns[i], w)
			}
		}
	}
}

// With the limit Check asks for, an operation with 1 KiB of incompressible
// input stays one listpack through its life (BENCHMARKS.md: a quarter of
// its memory); with Redis's default it is a table. This fails if the
// stored form grows a value past store.CompactHashValue.
func TestOperationHashIsAListpackUnderTheAdvisedLimit(t *testing.T) {
	for v, want := range map[int]string{64: "hashtable", store.CompactHashValue: "listpack"} {
		p := redistest.StartProcess(t, "--hash-max-listpack-value", strconv.Itoa(v))
		rdb := redistest.Client(t, p.URL())
		f := newFixtureOn(t, rdb)
		op := f.draft("agent", 1024)
		f.send(op)
		f.approve(op, "grace")
		keys, err := rdb.Keys(bg, "*"+op.Key+"*").Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("no key names %s: %v %v", op.Key, keys, err)
		}
		for _, k := range keys {
			if typ, _ := rdb.Type(bg, k).Result(); typ != "hash" {
				continue
			}
			if enc, _ := rdb.ObjectEncoding(bg, k).Result(); enc != want {
				t.Errorf("hash-max-listpack-value %d: %s is a %s, want %s", v, k, enc, want)
			}
		}
	}
}
