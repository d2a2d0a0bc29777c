package httpreq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

// movesTo is a bulk moving events 1..n to hour hh.
func movesTo(n, hh int) string {
	return items(n, func(i int) string {
		return fmt.Sprintf(`{"method":"PATCH","path":"/events/%d","body":{"start":"2025-06-02T%02d:00:00Z","end":"2025-06-02T%02d:30:00Z"}}`, i, hh, hh)
	})
}

// BenchmarkBulkPrepare: prepare of a bulk of n moves against a local ETag
// target: n state reads (8 at a time), the diffs, the bindings.
func BenchmarkBulkPrepare(b *testing.B) {
	for _, n := range []int{20, 100} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			f := newFakeTarget(b, true)
			putEvents(f, n)
			a, err := httpreq.New([]httpreq.Target{calendarTarget(f)})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			in := json.RawMessage(movesTo(n, 10))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent, Input: in}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBulkExecute: execution of a prepared bulk of n moves: n
// re-reads, n writes in order (each on a fresh connection, with its
// receipt), n post-write reads. Each round prepares a new bulk (untimed).
func BenchmarkBulkExecute(b *testing.B) {
	signer := benchSigner(b)
	for _, n := range []int{20, 100} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			f := newFakeTarget(b, true)
			putEvents(f, n)
			a, err := httpreq.New([]httpreq.Target{calendarTarget(f)})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			round := 0
			for b.Loop() {
				b.StopTimer()
				round++
				p, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent, Input: json.RawMessage(movesTo(n, round%24))})
				if err != nil {
					b.Fatal(err)
				}
				op := opOf(b, p)
				ctx := executing(op, signer)
				b.StartTimer()
				if _, err := a.Execute(ctx, op); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBulkStoredBytes measures what the store keeps of a bulk operation
// (every field of its Redis hash), after prepare and after execution,
// against the size of the request, and checks the prepared operation
// within guarantee 10 (4 × request + 64 KiB).
func TestBulkStoredBytes(t *testing.T) {
	e := newSvcEnv(t, true)
	putEvents(e.target, 100)
	for _, n := range []int{20, 100} {
		in := movesTo(n, 10+n%7)
		request := len(in) + len(httpreq.Name) + 64
		op := e.prepare(t, httpreq.Name, in)
		prepared := e.storedBytes(t, op.Key)
		e.approve(t, e.send(t, op.Key))
		done := e.run(t, op.Key)
		if done.Status != approval.StatusSucceeded {
			t.Fatalf("%d items: %s %+v", n, done.Status, done.Error)
		}
		executed := e.storedBytes(t, op.Key)
		t.Logf("%3d items: request %6d bytes; stored %6d bytes prepared (%.2f×), %6d after execution (%.2f×; result %d bytes); bound %d",
			n, request, prepared, float64(prepared)/float64(request), executed, float64(executed)/float64(request), len(done.Result), 4*request+64<<10)
		if prepared > 4*request+64<<10 {
			t.Fatalf("%d items: %d bytes stored for a %d-byte request", n, prepared, request)
		}
	}
}

// storedBytes adds up the fields of the operation's Redis hash.
func (e *svcEnv) storedBytes(t *testing.T, key string) int {
	t.Helper()
	ctx := context.Background()
	keys, err := e.rdb.Keys(ctx, "*:o:"+key).Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("operation hash of %s: %v %v", key, keys, err)
	}
	h, err := e.rdb.HGetAll(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range h {
		n += len(k) + len(v)
	}
	return n
}

func benchSigner(b *testing.B) approval.ReceiptSigner {
	b.Helper()
	k, err := receipt.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	s, err := receipt.NewSigner(k)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
