package store_test

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/testing/testkit"
	"github.com/countersign/countersign/store"
)

// A corrupt operation is never silently dropped: every read of it is
// logged with its key (never its content) and counted, reading it alone
// fails, and the lists that hold it go on listing the rest while it keeps
// its place in the principal's index.
func TestCorruptOperationIsReportedNotDropped(t *testing.T) {
	f := newFixture(t)
	logs := &testkit.Buffer{}
	st := store.New(f.rdb, slog.New(slog.NewJSONHandler(logs, nil)))
	t.Cleanup(func() { _ = st.Close() })
	var mu sync.Mutex
	var counted []string
	st.OnDecodeError = func(key string) { mu.Lock(); counted = append(counted, key); mu.Unlock() }

	good, bad := f.draft("p1", 10), f.draft("p1", 10)
	f.send(good)
	f.send(bad)
	keys, err := f.rdb.Keys(bg, "cs:*:o:"+bad.Key).Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the corrupt operation's key: %v %v", keys, err)
	}
	const content = "CONTENT-THAT-MUST-NOT-BE-LOGGED"
	// An approval whose record is damaged: were it dropped, the quorum would change.
	must(t, f.rdb.HSet(bg, keys[0], "a:grace", `{"w":"grace","v":"`+content).Err())

	_, err = st.Get(bg, bad.Ref())
	var de *store.DecodeError
	if !errors.As(err, &de) || de.Key != bad.Key || de.Field != "a:grace" || strings.Contains(err.Error(), content) {
		t.Fatalf("Get = %v; want a DecodeError naming the key and field, not the content", err)
	}
	list, err := st.List(bg, "p1", 10)
	if err != nil || len(list) != 1 || list[0].Key != good.Key {
		t.Fatalf("List = %d operations, %v; want the readable one", len(list), err)
	}
	if _, err := f.rdb.ZScore(bg, "cs:"+strings.Split(keys[0], ":")[1]+":pi:p1", bad.Key).Result(); err != nil {
		t.Fatalf("the corrupt operation left its principal's index: %v", err)
	}
	if list, err = st.List(bg, "p1", 10); err != nil || len(list) != 1 {
		t.Fatalf("a second List = %d, %v", len(list), err)
	}

	// Its trail too.
	must(t, f.rdb.HSet(bg, keys[0], "ev", "not json "+content).Err())
	if _, err := st.Events(bg, bad.Ref()); !errors.As(err, &de) || de.Field != "events" {
		t.Fatalf("Events = %v", err)
	}

	mu.Lock()
	n := len(counted)
	for _, k := range counted {
		if k != bad.Key {
			t.Errorf("counted %s", k)
		}
	}
	mu.Unlock()
	if n != 4 { // Get, two Lists, Events
		t.Errorf("counted %d decode errors, want 4", n)
	}
	out := logs.String()
	if strings.Count(out, "stored operation is unreadable") != 4 || !strings.Contains(out, bad.Key) || strings.Contains(out, content) {
		t.Fatalf("log:\n%s", out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
