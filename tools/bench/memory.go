package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
)

// Memory per operation, from INFO memory's used_memory on a private
// redis-server: the difference after N operations, once every worker and
// the audit sealer are idle, divided by N. Everything the operations cost
// is in it (their hashes, events, indexes, queue entries not yet trimmed,
// the audit stream before sealing drops it).

// prose is the kind of text an agent's email carries.
const prose = "Hello Ada,\n\nThank you for your patience while we put together the figures for the third quarter. " +
	"Revenue grew by eleven percent against the same quarter last year, driven mostly by the renewals in the northern " +
	"region and the two new accounts we signed in August. Costs rose less than planned: the move to the new warehouse " +
	"came in under budget, and freight prices eased in September. The attached summary lists each line item with last " +
	"year's figure beside it, so that you can see where the changes come from. Two points need a decision from you " +
	"before the board meeting on the fourteenth: whether we extend the pilot with the logistics partner for another six " +
	"months, and whether the marketing budget for the spring campaign stays at the level we agreed in June. I suggest we " +
	"keep both as they are and look at them again in January, when the full-year numbers are in. If you would like to " +
	"go through the details, I am free on Tuesday afternoon or Thursday morning.\n\nKind regards,\nGrace\n"

// kibInput is an email.send prepare whose input is 1 KiB of JSON.
func kibInput(i int, random bool) []byte {
	head := fmt.Sprintf(`{"to":["client@client.example"],"subject":"Quarterly figures %06d","text":""}`, i)
	n := 1024 - len(head)
	var text string
	if random {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		text = base64.RawStdEncoding.EncodeToString(b)[:n]
	} else {
		text = strings.Repeat(prose, n/len(prose)+1)[:n]
	}
	in, _ := json.Marshal(map[string]any{"to": []string{"client@client.example"}, "subject": fmt.Sprintf("Quarterly figures %06d", i), "text": text})
	for len(in) > 1024 { // escapes (\n) take two bytes: trim until it fits
		text = text[:len(text)-(len(in)-1024)]
		in, _ = json.Marshal(map[string]any{"to": []string{"client@client.example"}, "subject": fmt.Sprintf("Quarterly figures %06d", i), "text": text})
	}
	return fmt.Appendf(nil, `{"action":"email.send","input":%s}`, in)
}

// memResult is the memory phase's figures.
type memResult struct {
	Config     string // the redis-server's settings
	N          int
	InputBytes int
	Random     bool
	Pending    float64 // bytes per pending operation (sent, notified, waiting for a decision)
	Draft      float64 // bytes per draft not yet sent
	Tomb       float64 // bytes per never-sent draft after its expiry (0 when not measured)
	TombTTL    time.Duration
	DraftTTL   time.Duration
	Measured   bool               // whether the tombstones were measured
	Breakdown  map[string]float64 // MEMORY USAGE per pending operation, by key shape
}

// measureMemory runs on a service of its own, on a fresh redis-server.
func measureMemory(ctx context.Context, r *redisProc, c *client, pt *parties, n int, random bool, waitExpiry time.Duration) (memResult, error) {
	res := memResult{N: n, InputBytes: len(kibInput(0, random)) - len(`{"action":"email.send","input":}`), Random: random}
	l := &looper{c: c, pt: pt}
	for i := range 10 { // scripts loaded, streams and groups created
		if _, err := l.once(0, i); err != nil {
			return res, err
		}
	}
	m0, err := idleMemory(ctx, r)
	if err != nil {
		return res, err
	}
	// N pending operations: prepared, sent, notified.
	if _, err := create(c, pt, n, random, true); err != nil {
		return res, err
	}
	m1, err := idleMemory(ctx, r)
	if err != nil {
		return res, err
	}
	res.Pending = float64(m1-m0) / float64(n)
	if res.Breakdown, err = memBreakdown(ctx, r, n); err != nil {
		return res, err
	}
	// N drafts never sent.
	drafts, err := create(c, pt, n, random, false)
	if err != nil {
		return res, err
	}
	m2, err := idleMemory(ctx, r)
	if err != nil {
		return res, err
	}
	res.Draft = float64(m2-m1) / float64(n)
	res.DraftTTL, _ = keyTTL(ctx, r, drafts[0])
	if waitExpiry <= 0 {
		return res, nil
	}
	// Wait for the drafts' window to pass and the sweep to end them.
	time.Sleep(waitExpiry)
	deadline := time.Now().Add(30 * time.Second)
	for {
		due, err := sumZCard(ctx, r, "cs:*:d")
		if err != nil {
			return res, err
		}
		if due <= int64(n+10) { // the pending ones (and the warm-up's) are still due
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d operations still due 30 s after the drafts' expiry", due)
		}
		time.Sleep(200 * time.Millisecond)
	}
	m3, err := idleMemory(ctx, r)
	if err != nil {
		return res, err
	}
	res.Tomb, res.Measured = float64(m3-m1)/float64(n), true
	for _, k := range drafts[:min(20, len(drafts))] {
		if t, err := keyTTL(ctx, r, k); err == nil && t > res.TombTTL {
			res.TombTTL = t
		}
	}
	return res, nil
}

// create prepares n operations with a 1 KiB input (and sends them), 8 at a
// time, and waits until every sent one's notification arrived.
func create(c *client, pt *parties, n int, random, send bool) ([]string, error) {
	var mu sync.Mutex
	var keys []string
	var first error
	next := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for {
				mu.Lock()
				i := next
				next++
				stop := i >= n || first != nil
				mu.Unlock()
				if stop {
					return
				}
				c.api(req, "POST", "/v1/operations", kibInput(i, random))
				err := c.do(req, resp, 201)
				key := opKeyOf(resp.Body())
				if err == nil && send {
					a := pt.get(key)
					c.api(req, "POST", "/v1/operations/"+key+"/send", nil)
					if err = c.do(req, resp, 202); err == nil {
						select {
						case <-a.link:
						case <-time.After(15 * time.Second):
							err = errors.New("no notification within 15 s")
						}
					}
					pt.forget(key)
				}
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				keys = append(keys, key)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return keys, first
}

// idleMemory waits until the queues are drained and the audit sealed, then
// reads used_memory.
func idleMemory(ctx context.Context, r *redisProc) (int64, error) {
	deadline := time.Now().Add(60 * time.Second)
	quiet := 0
	for quiet < 3 {
		q, err := sumXLen(ctx, r, "cs:*:q")
		if err != nil {
			return 0, err
		}
		a, err := sumXLen(ctx, r, "cs:*:a")
		if err != nil {
			return 0, err
		}
		if q == 0 && a == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("not idle after 60 s: %d queued, %d audit events unsealed", q, a)
		}
		time.Sleep(300 * time.Millisecond)
	}
	return r.usedMemory(ctx)
}

func scanKeys(ctx context.Context, r *redisProc, match string) ([]string, error) {
	var out []string
	iter := r.rdb.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		out = append(out, iter.Val())
	}
	return out, iter.Err()
}

// sumXLen adds up the lengths of the streams whose names match. The
// streams (one queue and one audit chain per shard) are found once, by a
// scan, and remembered: a scan of a keyspace holding a run's operations
// takes seconds, which would read as work left over.
func sumXLen(ctx context.Context, r *redisProc, match string) (int64, error) {
	r.mu.Lock()
	keys := r.streams[match]
	r.mu.Unlock()
	if len(keys) == 0 {
		all, err := scanKeys(ctx, r, match)
		if err != nil {
			return 0, err
		}
		for _, k := range all {
			if t, _ := r.rdb.Type(ctx, k).Result(); t == "stream" {
				keys = append(keys, k)
			}
		}
		r.mu.Lock()
		r.streams[match] = keys
		r.mu.Unlock()
	}
	var n int64
	for _, k := range keys {
		l, err := r.rdb.XLen(ctx, k).Result()
		if err != nil {
			return 0, err
		}
		n += l
	}
	return n, nil
}

func sumZCard(ctx context.Context, r *redisProc, match string) (int64, error) {
	keys, err := scanKeys(ctx, r, match)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, k := range keys {
		if t, _ := r.rdb.Type(ctx, k).Result(); t != "zset" {
			continue
		}
		c, err := r.rdb.ZCard(ctx, k).Result()
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// keyTTL is the remaining life of an operation's hash.
func keyTTL(ctx context.Context, r *redisProc, op string) (time.Duration, error) {
	keys, err := scanKeys(ctx, r, "cs:*:o:"+op)
	if err != nil || len(keys) == 0 {
		return 0, errors.Join(err, fmt.Errorf("no key for %s", op))
	}
	d, err := r.rdb.PTTL(ctx, keys[0]).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return d, err
}

// memBreakdown is where the bytes are: MEMORY USAGE of every key, summed
// by the key's shape (operation keys and shard numbers folded), per
// operation. It does not add up to used_memory (the allocator's overhead
// and the keyspace's own tables are outside every key) but it shows which
// structure to shrink.
func memBreakdown(ctx context.Context, r *redisProc, n int) (map[string]float64, error) {
	keys, err := scanKeys(ctx, r, "*")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sampled := false
	for _, k := range keys {
		b, err := r.rdb.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			return nil, err
		}
		t, _ := r.rdb.Type(ctx, k).Result()
		enc, _ := r.rdb.ObjectEncoding(ctx, k).Result()
		out[keyShape(k)+" ("+t+", "+enc+")"] += float64(b) / float64(n)
		if t == "hash" && strings.Contains(k, ":o:") && !sampled {
			sampled = true
			fields, err := r.rdb.HGetAll(ctx, k).Result()
			if err != nil {
				return nil, err
			}
			for f, v := range fields {
				out["  one operation's field "+f] = float64(len(v))
			}
		}
	}
	return out, nil
}

// keyShape folds the parts of a key that vary: an operation key, a shard.
func keyShape(k string) string {
	parts := strings.Split(k, ":")
	for i, p := range parts {
		switch {
		case strings.HasPrefix(p, "op_"):
			parts[i] = "<op>"
		case strings.HasPrefix(p, "{") || (len(p) > 0 && strings.Trim(p, "0123456789") == ""):
			parts[i] = "<n>"
		case len(p) > 20:
			parts[i] = "<id>"
		}
	}
	return strings.Join(parts, ":")
}
