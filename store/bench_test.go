package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// Cost follows work due, not work stored: expiring the operations whose
// window passed, and listing a principal's newest, take the same time
// however much else is stored.
//
//	go test -run '^$' -bench 'Sweep|List' ./store/                       # small sizes (CI)
//	COUNTERSIGN_BIG_BENCH=1 go test -run '^$' -bench 'Sweep|List' -benchtime 5x ./store/
//
// With COUNTERSIGN_BIG_BENCH set, each benchmark starts a redis-server of
// its own (loading a million operations into a shared one would disturb
// everyone on it) and stores 1,000,000 operations (expiry) or 100,000 of
// one principal (listing). The operations that are read or expired are
// real ones (Create and Send); the others are stored compactly by a bulk
// loader below, the fields that the indexes and the scripts look at.

// size is a benchmark's population: n in the big run, small in CI.
func size(n, small int) int {
	if os.Getenv("COUNTERSIGN_BIG_BENCH") != "" {
		return n
	}
	return small
}

func benchRedis(b *testing.B) redis.UniversalClient {
	if os.Getenv("COUNTERSIGN_BIG_BENCH") != "" {
		p := redistest.StartProcess(b)
		c := redistest.Client(b, p.URL())
		return c
	}
	return redistest.Start(b).Client(b)
}

// fillScript stores n compact operations in one shard: a hash with what
// the expiry looks at (status, window, principal, payload hash, bytes),
// an entry in the shard's due index and, for listing, in the principal's
// index. ARGV: 1 shard tag, 2 principal, 3 first number, 4 n, 5 expires
// (ms), 6 '1' to index them for the principal, 7 created (ms) of the
// first, then field/value pairs to store instead of the compact ones.
var fillScript = redis.NewScript(`
local tag, who, from, n, x = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
for i = from, from + n - 1 do
  local key = string.format('op_fill%019d', i)
  local O = tag .. ':o:' .. key
  if #fields > 0 then
    redis.call('HSET', O, unpack(fields))
  else
    redis.call('HSET', O, 'p', who, 'st', 'pending_approval', 'x', x, 'ph', 'sha256:0', 'sz', 0)
    redis.call('ZADD', tag .. ':d', x, key .. '|' .. who)
  end
  if ARGV[6] == '1' then redis.call('ZADD', tag .. ':pi:' .. who, tonumber(ARGV[7]) - i, key) end
end
return n`)

// shardOf is the shard tag of a stored operation, read from its key.
func shardOf(b *testing.B, rdb redis.UniversalClient, key string) string {
	keys, err := rdb.Keys(context.Background(), "cs:*:o:"+key).Result()
	if err != nil || len(keys) != 1 {
		b.Fatalf("key of %s: %v %v", key, keys, err)
	}
	return strings.TrimSuffix(keys[0], ":o:"+key)
}

func fill(b *testing.B, rdb redis.UniversalClient, tag, who string, from, n int, x int64, index bool, created int64, fields ...any) {
	const batch = 10000
	for done := 0; done < n; done += batch {
		args := append([]any{tag, who, from + done, min(batch, n-done), x, map[bool]string{true: "1", false: "0"}[index], created}, fields...)
		if err := fillScript.Run(context.Background(), rdb, []string{tag + ":d"}, args...).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

type benchStore struct {
	st  *store.Redis
	rdb redis.UniversalClient
	now time.Time
	q   approval.Quotas
}

func newBenchStore(b *testing.B) *benchStore {
	rdb := benchRedis(b)
	st := store.New(rdb, nil)
	b.Cleanup(func() { _ = st.Close() })
	return &benchStore{st: st, rdb: rdb, now: time.Now().UTC().Truncate(time.Millisecond),
		q: approval.Quotas{MaxDrafts: 1e9, MaxPending: 1e9, MaxStoredBytes: 1 << 50, RequestsPerMinute: 1e9, SendsPerMinute: 1e9}}
}

// operation stores a real operation of principal p, sent when send, with
// its window ending at expires.
func (s *benchStore) operation(b *testing.B, p string, send bool, expires time.Time) *approval.Operation {
	in, _ := json.Marshal(map[string]any{"to": []string{"ada@client.example"}, "subject": "Figures", "text": "Hello Ada,\nthe figures.\n"})
	op := &approval.Operation{Key: approval.NewOperationKey(), Action: "email.send", Principal: p, Input: in,
		PayloadHash: "sha256:" + strings.Repeat("ab", 32), CreatedAt: s.now,
		Route:  approval.Route{Name: "r", Approvers: []string{"grace"}, Required: 1, Notify: []string{"email"}, ApprovalTTL: time.Hour},
		Status: approval.StatusDraft, ExpiresAt: expires, UpdatedAt: s.now}
	st := approval.Step{Tx: approval.RandomToken(8), Now: s.now, Event: approval.Event{Time: s.now, Event: "prepared", Actor: "principal:" + p},
		Retention: time.Hour, DraftRetention: time.Hour}
	if err := s.st.Create(context.Background(), op, approval.CreateTransition{Step: st, TTL: 2 * time.Hour, Quotas: s.q}); err != nil {
		b.Fatal(err)
	}
	if send {
		st.Tx, st.Event.Event = approval.RandomToken(8), "sent"
		_, _, err := s.st.Send(context.Background(), op.Ref(), approval.SendTransition{Step: st, ExpiresAt: expires, TTL: 2 * time.Hour,
			Quotas: s.q, Jobs: []approval.Job{{ID: "email:grace", Channel: "email", Approver: "grace", Link: true}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	return op
}

// BenchmarkSweepDueAmongStored expires the 1,000 operations whose window
// has passed among 1,000,000 stored (100 among 5,000 in CI): one op is one
// whole sweep of every shard.
// In the big run it also does so among 10,000 stored, for comparison.
func BenchmarkSweepDueAmongStored(b *testing.B) {
	due := size(1_000, 100)
	for _, stored := range sizes(size(1_000_000, 5_000), 10_000) {
		b.Run(fmt.Sprintf("stored=%d", stored), func(b *testing.B) { sweepAmong(b, stored, due) })
	}
}

// sizes is n, and in the big run also the smaller other for comparison.
func sizes(n, other int) []int {
	if os.Getenv("COUNTERSIGN_BIG_BENCH") != "" {
		return []int{other, n}
	}
	return []int{n}
}

func sweepAmong(b *testing.B, stored, due int) {
	s := newBenchStore(b)
	const principals = 200
	later := s.now.Add(time.Hour)
	tags := map[string]string{}
	for i := range principals {
		p := fmt.Sprintf("agent-%03d", i)
		tags[p] = shardOf(b, s.rdb, s.operation(b, p, true, later).Key)
	}
	start := time.Now()
	per := stored / principals
	for i := range principals {
		p := fmt.Sprintf("agent-%03d", i)
		fill(b, s.rdb, tags[p], p, i*per, per, ms(later), false, 0)
	}
	b.Logf("stored %d operations in %s", stored, time.Since(start).Round(time.Millisecond))
	sweep := approval.SweepTransition{Retention: time.Hour, DraftRetention: time.Hour,
		Event: approval.Event{Event: "expired", Actor: "system", Status: approval.StatusExpired}}
	at := s.now
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		at = at.Add(time.Second)
		for i := range due {
			s.operation(b, fmt.Sprintf("agent-%03d", i%principals), true, at)
		}
		b.StartTimer()
		evs, err := s.st.SweepExpired(context.Background(), at, sweep)
		if err != nil || len(evs) != due {
			b.Fatalf("sweep expired %d of %d: %v", len(evs), due, err)
		}
	}
	b.ReportMetric(float64(stored), "stored")
	b.ReportMetric(float64(due), "due")
}

// BenchmarkListNewest lists a principal's 50 newest operations among
// 100,000 of its own (2,000 in CI), stored as copies of a real one.
// In the big run it also does so among 1,000, for comparison.
func BenchmarkListNewest(b *testing.B) {
	for _, stored := range sizes(size(100_000, 2_000), 1_000) {
		b.Run(fmt.Sprintf("stored=%d", stored), func(b *testing.B) { listAmong(b, stored) })
	}
}

func listAmong(b *testing.B, stored int) {
	s := newBenchStore(b)
	op := s.operation(b, "lister", true, s.now.Add(time.Hour))
	tag := shardOf(b, s.rdb, op.Key)
	h, err := s.rdb.HGetAll(context.Background(), tag+":o:"+op.Key).Result()
	if err != nil {
		b.Fatal(err)
	}
	var fields []any
	for f, v := range h {
		fields = append(fields, f, v)
	}
	fill(b, s.rdb, tag, "lister", 0, stored-1, 0, true, ms(s.now)-1, fields...)
	b.ResetTimer()
	for b.Loop() {
		ops, err := s.st.List(context.Background(), "lister", 50)
		if err != nil || len(ops) != 50 || ops[0].Key != op.Key {
			b.Fatalf("list: %d operations, %v", len(ops), err)
		}
	}
	b.ReportMetric(float64(stored), "stored")
}

func ms(t time.Time) int64 { return t.UnixMilli() }
