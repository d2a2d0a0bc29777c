package httpreq_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/receipt"
)

// TestBulkReceiptsVerifyPerItem: every item's write carries its own
// receipt (jti op_…:N) covering exactly that write (method, URL, body,
// If-Match), which the target's middleware verifies and spends once.
func TestBulkReceiptsVerifyPerItem(t *testing.T) {
	k, _ := receipt.GenerateKey()
	signer, _ := receipt.NewSigner(k)
	g := newGuarded(t, signer.Keys())
	putEvents(g.fakeTarget, 4)
	a := newAction(t, g.target())
	p := prepare(t, a, reschedule(4, 4))
	op := opOf(t, p)
	out, err := a.Execute(executing(op, signer), op)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	if w := g.writes(); len(w) != 4 {
		t.Fatalf("%d writes passed the middleware, want 4", len(w))
	}
	var res httpreq.BulkResult
	if err := json.Unmarshal(out, &res); err != nil || res.Written != 4 {
		t.Fatalf("result = %s", out)
	}
	for i, h := range g.hdr {
		n := i + 1
		c, err := receipt.Verify(bg, h.Get(httpreq.ReceiptHeader), signer.Keys(), receipt.Expect{Audience: "calendar"})
		if err != nil {
			t.Fatalf("item %d: %v", n, err)
		}
		method, body := "PATCH", `{"end":"2025-06-02T10:30:00Z","start":"2025-06-02T10:00:00Z"}`
		if n == 4 {
			method, body = "DELETE", ""
		}
		want := receipt.Request{Method: method, URL: g.srv.URL + fmt.Sprintf("/api/events/%d", n),
			BodySHA256: receipt.BodySHA256([]byte(body)), IfMatch: `"v1"`, CheckIfMatch: true}
		if err := receipt.Covers(c, want); err != nil {
			t.Errorf("item %d: receipt does not cover its write: %v", n, err)
		}
		if id := fmt.Sprintf("%s:%d", op.Key, n); c.ID != id || h.Get("Idempotency-Key") != id || res.Items[i].ReceiptID != id {
			t.Errorf("item %d: jti %s, Idempotency-Key %s, result receipt_id %s; want %s", n, c.ID, h.Get("Idempotency-Key"), res.Items[i].ReceiptID, id)
		}
	}
	// Item 2's receipt replayed, even on its own write, is refused.
	req, _ := http.NewRequest("PATCH", g.srv.URL+"/api/events/2", strings.NewReader(`{"end":"2025-06-02T10:30:00Z","start":"2025-06-02T10:00:00Z"}`))
	req.Header = g.hdr[1].Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("replayed item receipt: %d", resp.StatusCode)
	}
}

// items builds a bulk of n items from f(i), i from 1.
func items(n int, f func(i int) string) string {
	parts := make([]string, n)
	for i := 1; i <= n; i++ {
		parts[i-1] = f(i)
	}
	return `{"target":"calendar","items":[` + strings.Join(parts, ",") + `]}`
}

// TestBulkHostileInputIsRefusedNamingTheItem: what a hostile agent may
// send in a bulk is refused before any request reaches the target, with
// the stable code and rule of a single request and the item named (its
// number in the message and details.item, its place in details.fields).
func TestBulkHostileInputIsRefusedNamingTheItem(t *testing.T) {
	f := newFakeTarget(t, true)
	tg := calendarTarget(f)
	a := newAction(t, tg)
	big := `"` + strings.Repeat("x", httpreq.DefaultMaxBodyBytes-20) + `"`
	deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
	at57 := func(bad string) string {
		return items(100, func(i int) string {
			if i == 57 {
				return bad
			}
			return moveItem(i)
		})
	}
	for _, c := range []struct {
		name, input string
		code        approval.Code
		rule, field string
		item        int
	}{
		{"101 items", items(101, moveItem), approval.CodeInvalidInput, "max_items", "items", 0},
		{"no items", `{"target":"calendar","items":[]}`, approval.CodeInvalidInput, "bulk_items", "items", 0},
		{"items and a method", `{"target":"calendar","method":"PATCH","items":[` + moveItem(1) + `]}`, approval.CodeInvalidInput, "bulk_exclusive", "items", 0},
		{"path outside the allow-list in item 57", at57(`{"method":"PATCH","path":"/admin/users/1","body":{"role":"owner"}}`), approval.CodePolicyDenied, "path_not_allowed", "", 57},
		{"method not allowed in item 57", at57(`{"method":"GET","path":"/events/57"}`), approval.CodePolicyDenied, "method_not_allowed", "", 57},
		{"traversal in item 57", at57(`{"method":"PATCH","path":"/events/../admin","body":{}}`), approval.CodeInvalidInput, "path_traversal", "items[56].path", 57},
		{"absolute URL in item 57", at57(`{"method":"PATCH","path":"https://evil.example/x","body":{}}`), approval.CodeInvalidInput, "absolute_url", "items[56].path", 57},
		{"query not allowed in item 57", at57(`{"method":"DELETE","path":"/events/57","query":{"force":"true"}}`), approval.CodePolicyDenied, "query_not_allowed", "items[56].query.force", 57},
		{"deeply nested body in item 57", at57(`{"method":"PATCH","path":"/events/57","body":` + deep + `}`), approval.CodeInvalidInput, "max_depth", "", 57},
		{"a target in item 57", at57(`{"target":"billing","method":"PATCH","path":"/events/57","body":{}}`), approval.CodeInvalidInput, "bulk_item_target", "items[56].target", 57},
		{"headers in item 57", at57(`{"method":"PATCH","path":"/events/57","body":{},"headers":{"X":"y"}}`), approval.CodeInvalidInput, "", "items[56].headers", 57},
		{"item 57 writes item 3's resource", at57(moveItem(3)), approval.CodeInvalidInput, "duplicate_resource", "items[56].path", 57},
		{"100 items of maximum size", items(100, func(i int) string {
			return fmt.Sprintf(`{"method":"POST","path":"/events","body":{"d":%s}}`, big)
		}), approval.CodePolicyDenied, "max_bulk_body_bytes", "", 5},
		{"one item over the body limit", items(3, func(i int) string {
			return fmt.Sprintf(`{"method":"POST","path":"/events","body":{"d":"%s"}}`, strings.Repeat("x", httpreq.DefaultMaxBodyBytes))
		}), approval.CodePolicyDenied, "max_body_bytes", "", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.requests())
			_, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent, Input: json.RawMessage(c.input)})
			e := codedErr(t, err)
			if e.Code != c.code || (c.rule != "" && e.Details["rule"] != c.rule) {
				t.Fatalf("%d-byte input: %s %v (%s), want %s %s", len(c.input), e.Code, e.Details["rule"], e.Message, c.code, c.rule)
			}
			if c.item != 0 && (e.Details["item"] != c.item || !strings.HasPrefix(e.Message, fmt.Sprintf("item %d", c.item))) {
				t.Fatalf("item not named: %q %v", e.Message, e.Details)
			}
			if c.field != "" {
				fs, _ := e.Details["fields"].([]approval.FieldError)
				if len(fs) == 0 || fs[0].Field != c.field {
					t.Fatalf("fields = %v, want %s", e.Details["fields"], c.field)
				}
			}
			if n := len(f.requests()) - before; n != 0 {
				t.Fatalf("%d requests reached the target for a refused bulk", n)
			}
			t.Logf("%s", e.Message[:min(len(e.Message), 160)])
		})
	}
}

// TestBulkPreparedSizeIsBounded: a bulk against large resources keeps
// within 4 × its input + 64 KiB (guarantee 10): values too long are kept
// as digests, diffs past the budget are cut (and the bodies shown), and a
// bulk that would still not fit is refused naming its largest items.
func TestBulkPreparedSizeIsBounded(t *testing.T) {
	f := newFakeTarget(t, true)
	for i := 1; i <= 100; i++ {
		d := eventDoc(i)
		d["title"] = strings.Repeat("t", 2000) // bound (state.fields) and long
		f.put(eventAt(i), d)
	}
	a := newAction(t, calendarTarget(f))
	for _, c := range []struct {
		name  string
		input string
	}{
		{"100 moves of events with long titles", reschedule(100)},
		{"100 deletes of events with long titles", items(100, deleteItem)},
		{"100 renames to long titles", items(100, func(i int) string {
			return fmt.Sprintf(`{"method":"PATCH","path":"/events/%d","body":{"title":"%s"}}`, i, strings.Repeat("n", 600))
		})},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent, Input: json.RawMessage(c.input)})
			if err != nil {
				e := codedErr(t, err)
				if e.Details["rule"] != "bulk_too_large" || e.Details["items"] == nil {
					t.Fatalf("refused without naming items: %v %v", e, e.Details)
				}
				t.Logf("%d-byte input refused: %s", len(c.input), e.Message)
				return
			}
			size := preparedBytes(t, p)
			bound := 4*len(c.input) + 64<<10
			t.Logf("input %d bytes → prepared %d bytes (%.2f×, bound %d), %d diff rows, warnings %v",
				len(c.input), size, float64(size)/float64(len(c.input)), bound, len(p.Preview.Diff), p.Preview.Warnings)
			if size > bound {
				t.Fatalf("prepared %d bytes from a %d-byte input", size, len(c.input))
			}
		})
	}
}

func preparedBytes(t testing.TB, p *approval.Prepared) int {
	b, err := json.Marshal(struct {
		Input   any
		Preview approval.Preview
		State   *approval.StateBinding
	}{p.Input, p.Preview, p.State})
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestBulkStateReadsAreBounded: a bulk's state reads run at most 8 at a
// time against the target, and all of them within the target's timeout
// together: a slow target makes the prepare fail (unavailable, naming an
// item) after about one timeout, not after 100 of them.
func TestBulkStateReadsAreBounded(t *testing.T) {
	f := newFakeTarget(t, true)
	putEvents(f, 100)
	var inFlight, peak atomic.Int32
	delay := atomic.Int64{}
	f.override = func(w http.ResponseWriter, r *http.Request) bool {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Duration(delay.Load()))
		return false
	}
	tg := calendarTarget(f)
	tg.Timeout = 400 * time.Millisecond
	a := newAction(t, tg)

	delay.Store(int64(2 * time.Millisecond))
	prepare(t, a, reschedule(100))
	if p := peak.Load(); p > 8 || p < 2 {
		t.Fatalf("peak concurrent state reads = %d, want 2..8", p)
	}

	delay.Store(int64(150 * time.Millisecond)) // 100 reads, 8 at a time: ~2 s, over the 400 ms timeout
	start := time.Now()
	_, err := a.Prepare(bg, approval.PrepareRequest{Principal: agent, Input: json.RawMessage(reschedule(100))})
	elapsed := time.Since(start)
	e := codedErr(t, err)
	if e.Code != approval.CodeUnavailable || e.Details["item"] == nil || !strings.Contains(e.Message, "timeout") {
		t.Fatalf("slow target: %s %v %q", e.Code, e.Details, e.Message)
	}
	if elapsed > 1500*time.Millisecond {
		t.Fatalf("prepare took %s against a 400ms target timeout", elapsed)
	}
	t.Logf("slow target refused after %s: %s", elapsed.Round(time.Millisecond), e.Message)
}
