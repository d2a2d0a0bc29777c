package store_test

import (
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/store"
)

// A reference by key alone finds the operation wherever it was created,
// and one whose keys are gone is not found, remembered owner or not.
func TestReferenceByKeyAlone(t *testing.T) {
	f := newFixture(t)
	other := store.New(f.rdb, nil) // a second replica on the same Redis
	t.Cleanup(func() { _ = other.Close() })
	op := f.draft("agent", 10)
	for _, st := range []*store.Redis{f.st, other, other} {
		got, err := st.Get(bg, approval.Ref{Key: op.Key})
		if err != nil || got.Principal != "agent" {
			t.Fatalf("get by key: %+v, %v", got, err)
		}
	}
	for _, k := range f.rdb.Keys(bg, "cs:*:o:"+op.Key).Val() {
		f.rdb.Del(bg, k)
	}
	for _, st := range []*store.Redis{f.st, other} {
		if _, err := st.Get(bg, approval.Ref{Key: op.Key}); approval.ErrorCode(err) != approval.CodeNotFound {
			t.Fatalf("a deleted operation: %v", err)
		}
	}
}
