package store_test

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
)

// BenchmarkCreate is prepare's one round trip: the create script (rate
// limit, quotas, idempotency, the hash, the indexes, the audit entry) for
// an operation with a 1 KiB input. On a redis-server (COUNTERSIGN_BIG_BENCH
// starts one of its own) it also reports the script's own time in Redis,
// from INFO commandstats.
//
// There it runs twice: with Redis's default hash-max-listpack-value (the
// operation's hash a table) and with store.CompactHashValue (a listpack).
//
//	COUNTERSIGN_BIG_BENCH=1 go test -run '^$' -bench Create -benchtime 20000x ./store/
func BenchmarkCreate(b *testing.B) {
	rdb := benchRedis(b)
	if os.Getenv("COUNTERSIGN_BIG_BENCH") == "" {
		benchCreate(b, rdb)
		return
	}
	for _, v := range []int{64, store.CompactHashValue} {
		b.Run("hash-max-listpack-value="+strconv.Itoa(v), func(b *testing.B) {
			if err := rdb.ConfigSet(bg, "hash-max-listpack-value", strconv.Itoa(v)).Err(); err != nil {
				b.Fatal(err)
			}
			benchCreate(b, rdb)
		})
	}
}

func benchCreate(b *testing.B, rdb redis.UniversalClient) {
	st := store.New(rdb, nil)
	defer st.Close()
	now := time.Now().UTC()
	in, _ := json.Marshal(map[string]string{"text": strings.Repeat("Thank you for the figures. ", 38)})
	q := approval.Quotas{MaxDrafts: 1 << 30, MaxPending: 1 << 30, MaxStoredBytes: 1 << 50, RequestsPerMinute: 1 << 30, SendsPerMinute: 1 << 30}
	ops := make([]*approval.Operation, b.N)
	for i := range ops {
		ops[i] = &approval.Operation{Key: approval.NewOperationKey(), Action: "email.send", Principal: "agent", Input: in,
			PayloadHash: "sha256:" + strings.Repeat("ab", 32), CreatedAt: now,
			Route:  approval.Route{Name: "outbound email", Approvers: []string{"grace", "ada"}, Required: 1, ApprovalTTL: time.Hour},
			Status: approval.StatusDraft, ExpiresAt: now.Add(15 * time.Minute), UpdatedAt: now,
			Preview: approval.Preview{Title: "t", Fields: []approval.Field{}}}
	}
	resetStats(b, rdb)
	b.ResetTimer()
	for i := range b.N {
		step := approval.Step{Tx: approval.RandomToken(10), Now: now, Event: approval.Event{Time: now, Event: "prepared", Actor: "principal:agent",
			Status: approval.StatusDraft, Details: map[string]any{"route": "outbound email"}}}
		if err := st.Create(bg, ops[i], approval.CreateTransition{Step: step, TTL: time.Hour, Quotas: q}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportScriptTime(b, rdb)
}

func resetStats(b *testing.B, rdb redis.UniversalClient) {
	if os.Getenv("COUNTERSIGN_BIG_BENCH") != "" {
		if err := rdb.ConfigResetStat(bg).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// reportScriptTime reports the µs Redis spent per operation in scripts.
func reportScriptTime(b *testing.B, rdb redis.UniversalClient) {
	if os.Getenv("COUNTERSIGN_BIG_BENCH") == "" {
		return
	}
	info, err := rdb.Info(bg, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, kv := range strings.Split(line[strings.IndexByte(line, ':')+1:], ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				us, _ := strconv.ParseFloat(v, 64)
				b.ReportMetric(us/float64(b.N), "redis-µs/op")
			}
		}
	}
}
