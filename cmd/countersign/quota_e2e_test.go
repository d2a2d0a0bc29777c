package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// The examples of a hostile agent exhausting the service, each
// refused with quota_exceeded or rate_limited, with what it costs Redis.

func bigEmail(n int) string {
	text := strings.Repeat("x", n)
	b, _ := json.Marshal(map[string]any{"action": "email.send", "input": map[string]any{
		"to": []string{"client@client.example"}, "subject": "big", "text": text}})
	return string(b)
}

// incompressibleEmail is an email.send request whose text is n random
// letters: what a hostile agent sends to make its operation cost the most
// (compact.go compresses prose; random text does not shrink).
func incompressibleEmail(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	text := make([]byte, n)
	for i := range text {
		text[i] = letters[rand.IntN(len(letters))]
	}
	b, _ := json.Marshal(map[string]any{"action": "email.send", "input": map[string]any{
		"to": []string{"client@client.example"}, "subject": "big", "text": string(text)}})
	return string(b)
}

func usedMem(t *testing.T, srv *testService) int64 {
	c := redistest.Client(t, srv.RedisURL)
	info := c.Info(context.Background(), "memory").Val()
	m := usedMemory.FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// TestHostileDraftsHitTheirQuota: 200 drafts of 200 KB from one principal.
// Before, all were accepted (Redis +76 MB); now the stored-bytes quota
// (32 MiB) and the drafts quota stop them, and canceling drafts frees
// their bytes at once.
func TestHostileDraftsHitTheirQuota(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "console"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	body := bigEmail(199 << 10)
	mem0 := usedMem(t, srv)
	accepted, refused := 0, 0
	var first string
	var keys []string
	for range 200 {
		st, raw := srv.call(t, "POST", "/v1/operations", srv.APIKey, body)
		switch st {
		case 201:
			accepted++
			keys = append(keys, decode[op](t, raw).Key)
		case 429:
			refused++
			if first == "" {
				first = string(raw)
			}
		default:
			t.Fatalf("prepare: %d %s", st, raw)
		}
	}
	mem1 := usedMem(t, srv)
	t.Logf("200 drafts of 200 KB: %d accepted, %d refused (%s); Redis +%d bytes", accepted, refused, first, mem1-mem0)
	if refused == 0 || !strings.Contains(first, `"quota_exceeded"`) || !strings.Contains(first, `"max_stored_bytes"`) {
		t.Fatalf("no quota: %d accepted", accepted)
	}
	if redistest.Real() && mem1-mem0 > 40<<20 {
		t.Fatalf("Redis grew by %d bytes for one principal (quota 32 MiB)", mem1-mem0)
	}
	// Canceling drafts frees their bytes: new drafts fit again.
	for _, k := range keys[:10] {
		if st, raw := srv.call(t, "POST", "/v1/operations/"+k+"/cancel", srv.APIKey, ""); st != 200 {
			t.Fatalf("cancel: %d %s", st, raw)
		}
	}
	if st, raw := srv.call(t, "POST", "/v1/operations", srv.APIKey, body); st != 201 {
		t.Fatalf("after canceling drafts: %d %s", st, raw)
	}
}

// TestHostileSendsAreLimited: 30 sends in 3 s produced 60 emails and 30
// Slack posts; sends per minute are now limited (default 30) and pending
// operations too (default 50).
func TestHostileSendsAreLimited(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	cfg := strings.Replace(loopConfig(1, "email"), "    on_behalf_of: sam\n", "    on_behalf_of: sam\n    quotas: {sends_per_minute: 14, max_pending: 8}\n", 1)
	srv := startService(t, serviceOpts{Config: cfg, Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	var keys []string
	for range 12 {
		keys = append(keys, decode[op](t, mustCall(t, srv, "POST", "/v1/operations", emailBody, 201)).Key)
	}
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, raw := srv.call(t, "POST", "/v1/operations/"+k+"/send", srv.APIKey, "")
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.Unmarshal(raw, &e)
			mu.Lock()
			codes[fmt.Sprint(st, " ", e.Error.Code)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("12 concurrent sends, max_pending 8: %v", codes)
	if codes["202 "] != 8 || codes["429 quota_exceeded"] != 4 { // 12 sends of 14 a minute: 4 over the pending quota
		t.Fatalf("sends: %v", codes)
	}
	// The rate: more sends than 14 a minute are refused even with room.
	for _, k := range keys[:8] {
		mustCall(t, srv, "POST", "/v1/operations/"+k+"/cancel", "", 200)
	}
	refused := 0
	for range 4 {
		k := decode[op](t, mustCall(t, srv, "POST", "/v1/operations", emailBody, 201)).Key
		if st, _ := srv.call(t, "POST", "/v1/operations/"+k+"/send", srv.APIKey, ""); st == 429 {
			refused++
		}
	}
	if refused != 2 { // 12 sends so far (8 in, 4 over quota, all counted) + 2 more = 14 in the minute
		t.Fatalf("sends over 14 a minute refused: %d of 4", refused)
	}
}

// TestLargestSingleRequest measures what the largest requests each action
// accepts cost Redis (guarantee 10: stored ≤ 4 × request + 64 KiB).
func TestLargestSingleRequest(t *testing.T) {
	if !redistest.Real() {
		t.Skip("measures a real Redis's memory")
	}
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "console"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	for range 5 { // the first operations create the shard's structures
		mustCall(t, srv, "POST", "/v1/operations", bigEmail(100), 201)
	}
	for _, n := range []int{1 << 10, 64 << 10, 190 << 10} {
		body := incompressibleEmail(n)
		const each = 5
		mem0 := usedMem(t, srv)
		for range each {
			mustCall(t, srv, "POST", "/v1/operations", body, 201)
		}
		grew := (usedMem(t, srv) - mem0) / each
		t.Logf("email.send, %d-byte request: Redis +%d bytes each (%.2f × the request)", len(body), grew, float64(grew)/float64(len(body)))
		if lim := int64(4*len(body) + 64<<10); grew > lim {
			t.Errorf("one request grew Redis by %d bytes, over %d", grew, lim)
		}
	}
}
