package main

// Issue 19, "a fresh round of attacks of these classes, with inputs of your
// own, holds": a hostile agent's third round against the whole service,
// with inputs the fixes' own tests do not use. Classes (issue 19): 1
// refusing is cheap (guarantee 14), 2 two spellings of one value and
// numbers (13), 3 encoded words in header values (13), 7 JSON-RPC batches
// on /mcp (10).

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/hostilehttp"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

// gzipBomb is 32 MiB of zeros, gzipped (about 32 KiB): a server that
// decompresses it is seen in the heap.
func gzipBomb(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	must(t, err)
	zeros := make([]byte, 64<<10)
	for range 512 {
		_, err := w.Write(zeros)
		must(t, err)
	}
	must(t, w.Close())
	return buf.Bytes()
}

// TestHostile3OddEncodingsRefusedCheaply (class 1, guarantee 14): with no
// credentials, every spelling of a Content-Encoding other than identity
// (upper case, x-gzip, compress, "identity;q=0", a second header, a list
// ending in a coding, a lower-case header name) gets 415 on every kind of
// endpoint, and identity itself does not; Transfer-Encoding tricks,
// a huge path, a huge query string and thousands of headers are refused
// with a 4xx or a closed connection, quickly; and the heap stays bounded
// under all of it, four at once.
func TestHostile3OddEncodingsRefusedCheaply(t *testing.T) {
	srv := startSlackService(t, 1, `"slack:#approvals"`)
	addr := srv.Addr
	bomb := gzipBomb(t)
	sendBomb := func(w io.Writer) { _, _ = w.Write(bomb) }
	chunkedBomb := func(w io.Writer) {
		for off := 0; off < len(bomb); off += 4096 {
			end := min(off+4096, len(bomb))
			if _, err := fmt.Fprintf(w, "%x\r\n%s\r\n", end-off, bomb[off:end]); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, "0\r\n\r\n")
	}
	routes := []struct{ method, path string }{
		{"POST", "/v1/operations"}, {"POST", "/v1/admin/operations/op_x/cancel"}, {"POST", "/mcp"},
		{"POST", "/slack/interactions"}, {"POST", "/teams/messages"}, {"POST", "/a/k1.b3BfeHxncmFjZXxlbWFpbHwxfG4.sig"},
		{"POST", "/inbox/op_x"}, {"POST", "/console/op_x/cancel"}, {"GET", "/healthz"},
	}
	// Built once, so that what the test measures of its process is the
	// server's allocations, not the client's.
	zeros := make([]byte, 64<<10)
	overflow := []byte("ffffffffffffffffffff\r\n" + strings.Repeat("a", 64<<10))
	extension := []byte("2;" + strings.Repeat("x=y;", 256<<10) + "\r\n{}\r\n0\r\n\r\n")
	cl := func(extra string) []byte {
		return fmt.Appendf(nil, "Content-Type: application/json\r\n%sContent-Length: %d\r\n", extra, len(bomb))
	}
	// Every one of these must be 415.
	encodings := []hostilehttp.Shape{
		{Name: "GZIP", Head: cl("Content-Encoding: GZIP\r\n"), Body: sendBomb},
		{Name: "x-gzip", Head: cl("Content-Encoding: x-gzip\r\n"), Body: sendBomb},
		{Name: "compress", Head: cl("Content-Encoding: compress\r\n"), Body: sendBomb},
		{Name: "identity;q=0", Head: cl("Content-Encoding: identity;q=0\r\n"), Body: sendBomb},
		{Name: "identity then gzip headers", Head: cl("Content-Encoding: identity\r\nContent-Encoding: gzip\r\n"), Body: sendBomb},
		{Name: "gzip then identity headers", Head: cl("Content-Encoding: gzip\r\nContent-Encoding: identity\r\n"), Body: sendBomb},
		{Name: "identity, gzip", Head: cl("Content-Encoding: identity, gzip\r\n"), Body: sendBomb},
		{Name: "lower-case name", Head: cl("content-encoding: gzip\r\n"), Body: sendBomb},
		{Name: "mixed-case name, padded value", Head: cl("cOnTeNt-EnCoDiNg:  \t gzip \t\r\n"), Body: sendBomb},
		{Name: "empty list member", Head: cl("Content-Encoding: identity,,gzip\r\n"), Body: sendBomb},
		{Name: "gzip, chunked body", Head: []byte("Content-Type: application/json\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"), Body: chunkedBomb},
		{Name: "aes128gcm", Head: cl("Content-Encoding: aes128gcm\r\n"), Body: sendBomb},
		{Name: "gzip with Expect: 100-continue", Head: cl("Expect: 100-continue\r\nContent-Encoding: gzip\r\n"), Body: sendBomb},
		{Name: "gzip with a wrong key", Head: cl("Authorization: Bearer cs_not_a_key\r\nContent-Encoding: gzip\r\n"), Body: sendBomb},
	}
	// These are malformed or unusual framing: any refusal (4xx, 501, or a
	// closed connection) is right; a 2xx or a slow answer is not.
	tricks := []hostilehttp.Shape{
		{Name: "TE gzip, chunked", Head: []byte("Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n"), Body: chunkedBomb},
		{Name: "TE gzip", Head: []byte("Content-Type: application/json\r\nTransfer-Encoding: gzip\r\n"), Body: sendBomb},
		{Name: "TE CHUNKED and Content-Length", Head: []byte("Content-Type: application/json\r\nTransfer-Encoding: CHUNKED\r\nContent-Length: 5\r\n"), Body: chunkedBomb},
		{Name: "TE chunked twice", Head: []byte("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"), Body: chunkedBomb},
		{Name: "two Content-Lengths", Head: fmt.Appendf(nil, "Content-Type: application/json\r\nContent-Length: 5\r\nContent-Length: %d\r\n", len(bomb)), Body: sendBomb},
		{Name: "obs-fold encoding", Head: cl("Content-Encoding: identity\r\n gzip\r\n"), Body: sendBomb},
		{Name: "space before colon", Head: cl("Content-Encoding : gzip\r\n"), Body: sendBomb},
		{Name: "wrong key, 1 GiB body", Head: []byte("Authorization: Bearer cs_not_a_key\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n"), Body: func(w io.Writer) {
			for n := 0; n < 16<<20; n += len(zeros) {
				if _, err := w.Write(zeros); err != nil {
					return
				}
			}
		}},
		{Name: "chunk size overflow", Head: []byte("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"), Body: func(w io.Writer) {
			_, _ = w.Write(overflow)
		}},
		{Name: "1 MiB chunk extension", Head: []byte("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"), Body: func(w io.Writer) {
			_, _ = w.Write(extension)
		}},
		{Name: "10k headers", Head: []byte(strings.Repeat("X-A: b\r\n", 10000) + "Content-Length: 0\r\n"), Body: func(io.Writer) {}},
	}
	type attack struct {
		shape      hostilehttp.Shape
		method     string
		path       string
		want415    bool
		notTwoXX   bool
		identityOK bool
	}
	var attacks []attack
	for _, r := range routes {
		if r.method != "POST" {
			continue
		}
		for _, sh := range encodings {
			attacks = append(attacks, attack{shape: sh, method: r.method, path: r.path, want415: true})
		}
		for _, sh := range tricks {
			attacks = append(attacks, attack{shape: sh, method: r.method, path: r.path, notTwoXX: true})
		}
		for _, enc := range []string{"identity", "IDENTITY", " identity , Identity "} {
			attacks = append(attacks, attack{shape: hostilehttp.Shape{Name: "encoding " + enc,
				Head: []byte("Content-Type: application/json\r\nContent-Encoding: " + enc + "\r\nContent-Length: 2\r\n"),
				Body: func(w io.Writer) { _, _ = io.WriteString(w, "{}") }}, method: r.method, path: r.path, identityOK: true})
		}
	}
	// A GET with a gzip body is refused too (guarantee 14: before anything).
	attacks = append(attacks, attack{shape: encodings[0], method: "GET", path: "/healthz", want415: true})
	// Huge paths and query strings, on API and page routes.
	for _, p := range []string{"/v1/operations/" + strings.Repeat("a", 256<<10), "/v1/operations?status=" + strings.Repeat("%41", 96<<10),
		"/a/" + strings.Repeat("x.", 64<<10), "/mcp?" + strings.Repeat("a=b&", 32<<10), "/" + strings.Repeat("../", 40<<10)} {
		attacks = append(attacks, attack{shape: hostilehttp.Shape{Name: fmt.Sprintf("%d-byte target", len(p)),
			Head: []byte("Content-Length: 0\r\n"), Body: func(io.Writer) {}}, method: "GET", path: p, notTwoXX: true})
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stopPeak := hostilehttp.HeapPeak()
	const parallel = 4
	var slowest time.Duration
	var mu sync.Mutex
	statuses := map[string]map[int]bool{} // shape → statuses seen (0: closed)
	start := time.Now()
	for _, a := range attacks {
		var wg sync.WaitGroup
		for range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := hostilehttp.Send(addr, a.method, a.path, "", a.shape)
				name := fmt.Sprintf("%s to %s %.60s", a.shape.Name, a.method, a.path)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				mu.Lock()
				slowest = max(slowest, res.Took)
				if statuses[a.shape.Name] == nil {
					statuses[a.shape.Name] = map[int]bool{}
				}
				statuses[a.shape.Name][res.Status] = true
				mu.Unlock()
				switch {
				case a.want415 && res.Status != http.StatusUnsupportedMediaType:
					t.Errorf("%s: %d, want 415", name, res.Status)
				case a.identityOK && (res.Status == http.StatusUnsupportedMediaType || res.Status == 0):
					t.Errorf("%s: %d; identity is no coding and must not be refused as one", name, res.Status)
				case a.notTwoXX && res.Status >= 200 && res.Status < 300:
					t.Errorf("%s: %d, want a refusal", name, res.Status)
				case res.Status >= 500 && res.Status != http.StatusNotImplemented:
					t.Errorf("%s: %d", name, res.Status)
				case res.Took > 5*time.Second:
					t.Errorf("%s: answered in %s", name, res.Took)
				}
			}()
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	peak := stopPeak()
	growth := int64(peak) - int64(before.HeapInuse)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("%d unauthenticated hostile requests (%d attacks × %d at once) in %s, slowest %s; allocated %.1f KiB a request (the idle service's own allocations included); peak heap %.1f MiB over the %.1f MiB before",
		len(attacks)*parallel, len(attacks), parallel, elapsed.Round(time.Millisecond), slowest.Round(time.Millisecond),
		float64(after.TotalAlloc-before.TotalAlloc)/float64(len(attacks)*parallel)/1024, float64(growth)/(1<<20), float64(before.HeapInuse)/(1<<20))
	for _, name := range slices.Sorted(maps.Keys(statuses)) {
		t.Logf("%s: %v", name, statuses[name])
	}
	// As TestHostileRequestsCostLittle: on miniredis the store's Lua runs
	// in this process, so only a real Redis bounds allocations.
	if per := (after.TotalAlloc - before.TotalAlloc) / uint64(len(attacks)*parallel); redistest.Real() && per > 96<<10 {
		t.Errorf("a refused request allocated %d bytes on average; the bound is 96 KiB", per)
	}
	// One decompressed bomb alone would be 32 MiB; four at once 128 MiB.
	if growth > 24<<20 {
		t.Errorf("the heap grew by %d bytes; the bound is 24 MiB", growth)
	}
	if strings.Contains(srv.Stderr.String(), "panic") {
		t.Errorf("the service panicked:\n%s", srv.Stderr.String())
	}
}

// hostile3Config is the http.request configuration with one more route: a
// platinum customer needs both finance approvers.
func hostile3Config(t *testing.T, targetURL string) string {
	t.Helper()
	cfg, err := os.ReadFile(httpreqConfig(t, targetURL))
	must(t, err)
	s := strings.Replace(string(cfg), "  - name: big-invoices\n", `  - name: platinum
    match: {action: http.request, target: billing, when: [{attr: body.customer.tier, eq: platinum}]}
    approvers: {groups: [finance]}
    required: 2
    notify: [console]
  - name: big-invoices
`, 1)
	if s == string(cfg) {
		t.Fatal("the config changed: no big-invoices route")
	}
	return s
}

// TestHostile3TwoSpellingsAndNumbers (class 2, guarantee 13): bodies that
// spell one value twice (duplicate members, escaped member names, a dotted
// member beside a nested one, at any depth) and numbers in unusual
// spellings are either refused with invalid_input, storing nothing, or
// routed by exactly the value stored (which is what executes): never the
// one-approver route while what runs holds a value that needs two.
func TestHostile3TwoSpellingsAndNumbers(t *testing.T) {
	srv := startService(t, serviceOpts{Config: hostile3Config(t, "http://127.0.0.1:1"), Env: map[string]string{"CAL_TOKEN": httpreqCred}})
	srv.APIKey = httpreqAPIKey
	srv.call(t, "GET", "/v1/operations", srv.APIKey, "") // the principal's rate counter

	type verdict int
	const (
		refuse       verdict = iota // must be invalid_input
		refuseOrSafe                // invalid_input, or routed as the stored value says
	)
	cases := []struct {
		name, body string
		want       verdict
		rule       string
	}{
		{"duplicate amount, big last", `{"amount":50,"amount":5000}`, refuseOrSafe, ""},
		{"duplicate amount, big first", `{"amount":5000,"amount":50}`, refuseOrSafe, ""},
		{"duplicate amount, escaped name", `{"amount":50,"\u0061mount":5000}`, refuseOrSafe, ""},
		{"duplicate amount, escaped both", `{"\u0061mount":5000,"am\u006funt":50}`, refuseOrSafe, ""},
		{"duplicate tier, nested objects", `{"customer":{"tier":"platinum"},"customer":{"tier":"gold"}}`, refuseOrSafe, ""},
		{"duplicate tier inside one object", `{"customer":{"tier":"platinum","tier":"gold"}}`, refuseOrSafe, ""},
		{"escaped dot beside nested", `{"customer":{"tier":"gold"},"customer\u002etier":"platinum"}`, refuse, "ambiguous_name"},
		{"dotted key first, nested after", `{"customer.tier":"platinum","customer":{"tier":"gold"}}`, refuse, "ambiguous_name"},
		{"dotted at depth", `{"customer":{"tier":{"x":1},"tier.x":2}}`, refuse, "ambiguous_name"},
		{"dotted key alone", `{"customer.tier":"platinum"}`, refuseOrSafe, ""},
		{"slash key beside nested", `{"customer":{"tier":"gold"},"customer/tier":"platinum"}`, refuseOrSafe, ""},
		{"tilde keys beside nested", `{"customer":{"tier":"gold"},"customer~1tier":"platinum","customer~0tier":"platinum"}`, refuseOrSafe, ""},
		{"empty key and dots", `{"customer":{"":{"tier":"platinum"},"tier":"gold"},"customer..tier":"platinum"}`, refuseOrSafe, ""},
		{"1E+2", `{"amount":1E+2}`, refuseOrSafe, ""},
		{"1E+4", `{"amount":1E+4}`, refuseOrSafe, ""},
		{"1e3 plus a hair", `{"amount":1000.0000000000001}`, refuseOrSafe, ""},
		{"1e3 plus less than a double holds", `{"amount":1000.00000000000001}`, refuseOrSafe, ""},
		{"2^53+1 ", `{"amount":9007199254740993}`, refuse, "number_precision"},
		{"123456789012345678", `{"amount":123456789012345678}`, refuse, "number_precision"},
		{"5e-324", `{"amount":5e-324}`, refuseOrSafe, ""},
		{"0.30000000000000004", `{"amount":0.30000000000000004}`, refuseOrSafe, ""},
		{"-0", `{"amount":-0}`, refuseOrSafe, ""},
		{"1e400", `{"amount":1e400}`, refuse, ""},
		{"-1e400", `{"amount":-1e400}`, refuse, ""},
		{"1e-400", `{"amount":1e-400}`, refuseOrSafe, ""},
		{"big exponent fits", `{"amount":1.7976931348623157e308}`, refuseOrSafe, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := storedOperations(t, srv)
			req := `{"action":"http.request","input":{"target":"billing","method":"POST","path":"/invoices","body":` + tc.body + `}}`
			st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, req)
			if st != 201 {
				e := decode[apiError](t, b)
				if st != 400 || e.Error.Code != "invalid_input" {
					t.Fatalf("%s: %d %s, want invalid_input or accepted", tc.body, st, b)
				}
				if tc.rule != "" && e.Error.Details["rule"] != tc.rule {
					t.Errorf("%s: rule %v, want %s: %s", tc.body, e.Error.Details["rule"], tc.rule, b)
				}
				if after := storedOperations(t, srv); after != before {
					t.Fatalf("%s: refused but stored %d keys", tc.body, after-before)
				}
				t.Logf("%s: refused, %v", tc.body, e.Error.Details["rule"])
				return
			}
			if tc.want == refuse {
				t.Fatalf("%s: accepted, want invalid_input %s: %s", tc.body, tc.rule, b)
			}
			o := decode[op](t, b)
			var stored struct {
				Body json.RawMessage `json:"body"`
			}
			must(t, json.Unmarshal(o.Input, &stored))
			need := requiredFor(t, stored.Body)
			t.Logf("%s: accepted, stored body %s, %d approver(s)", tc.body, stored.Body, o.Approval.Required)
			if o.Approval.Required < need {
				t.Errorf("%s: stored (and sent) body %s needs %d approvers; the route gave %d", tc.body, stored.Body, need, o.Approval.Required)
			}
		})
	}
}

// requiredFor is what the policy of hostile3Config demands of a stored
// body, read by every reader a target might be: each duplicate member
// (JSON decoders keep the first or the last) and each number as a double.
func requiredFor(t *testing.T, body json.RawMessage) int {
	t.Helper()
	need := 1
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var path []string // one entry per open container: the member being read
	var isObj []bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		must(t, err)
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				path, isObj = append(path, "[]"), append(isObj, v == '{')
				expectKey = v == '{'
				continue
			}
			path, isObj = path[:len(path)-1], isObj[:len(isObj)-1]
		case string:
			if expectKey {
				path[len(path)-1] = v
				expectKey = false
				continue
			}
			if strings.Join(path, ".") == "customer.tier" && v == "platinum" {
				need = 2
			}
		case json.Number:
			if strings.Join(path, ".") == "amount" {
				f, err := strconv.ParseFloat(v.String(), 64)
				if err != nil || math.IsInf(f, 0) || f > 1000 {
					need = 2
				}
			}
		}
		expectKey = len(isObj) > 0 && isObj[len(isObj)-1]
	}
	return need
}

// TestHostile3MCPBatchesInAnyFormStoreNothing (class 7, guarantee 10 per
// HTTP request): a JSON-RPC batch of prepares on /mcp, however it is
// written (whitespace before '[', nested arrays, a byte order mark, a
// batch of one, under any Content-Type, with or without a protocol
// version, with a Content-Length or chunked), prepares nothing and leaves Redis as it was.
func TestHostile3MCPBatchesInAnyFormStoreNothing(t *testing.T) {
	srv, target := hostileService(t)
	srv.call(t, "GET", "/v1/operations", srv.APIKey, "") // the principal's rate counter
	call := func(i int) string {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": map[string]any{
			"name": "prepare_http_request", "arguments": map[string]any{"target": "calendar", "method": "PATCH", "path": "/events/7",
				"body": map[string]any{"title": fmt.Sprint("Standup ", i)}}}})
		return string(b)
	}
	calls := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, call(i))
		}
		return strings.Join(parts, ",")
	}
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	bodies := map[string]string{
		"spaces and tabs before":  " \t\r\n \t[" + calls(20) + "]",
		"nested":                  "[[" + calls(20) + "]]",
		"nested inside a batch":   "[" + call(0) + ",[" + calls(10) + "]]",
		"byte order mark":         "\xef\xbb\xbf[" + calls(20) + "]",
		"form feed before":        "\f[" + calls(20) + "]",
		"vertical tab before":     "\v[" + calls(20) + "]",
		"NUL before":              "\x00[" + calls(20) + "]",
		"a batch of one":          "[" + call(0) + "]",
		"initialize and prepares": "[" + init + "," + calls(20) + "]",
		"UTF-16 encoded":          utf16le("[" + calls(5) + "]"),
	}
	client := &http.Client{Transport: &http.Transport{}} // not the OpenAPI check: /mcp is not REST
	keys0, mem0 := redisSize(t, srv)
	total := 0
	for name, body := range bodies {
		for _, ct := range []string{"application/json", "APPLICATION/JSON; charset=utf-8", "text/plain", "application/json-rpc", ""} {
			for _, version := range []string{"", "2025-03-26", "2024-11-05"} {
				var r io.Reader = strings.NewReader(body)
				if total%2 == 1 {
					r = io.MultiReader(r) // sent chunked, with no Content-Length
				}
				req, err := http.NewRequest("POST", srv.URL()+"/mcp", r)
				must(t, err)
				req.Header.Set("Authorization", "Bearer "+srv.APIKey)
				if ct != "" {
					req.Header.Set("Content-Type", ct)
				}
				req.Header.Set("Accept", "application/json, text/event-stream")
				if version != "" {
					req.Header.Set("Mcp-Protocol-Version", version)
				}
				resp, err := client.Do(req)
				must(t, err)
				got, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
				_ = resp.Body.Close()
				total++
				if resp.StatusCode < 400 || bytes.Contains(got, []byte("op_")) {
					t.Errorf("%s (Content-Type %q, version %q): %d %.300s", name, ct, version, resp.StatusCode, got)
				}
			}
		}
	}
	keys1, mem1 := redisSize(t, srv)
	t.Logf("%d batch requests: Redis keys %d → %d, memory %d → %d bytes", total, keys0, keys1, mem0, mem1)
	if keys1 != keys0 {
		t.Errorf("refused batches left %d keys", keys1-keys0)
	}
	if redistest.Real() && mem1-mem0 > 256<<10 {
		t.Errorf("Redis grew by %d bytes", mem1-mem0)
	}
	// One call followed by more (a batch after it, or more calls): the
	// SDK reads the first message and ignores the rest, so such a request
	// prepares at most the one operation a single call would.
	opKeys := func() int {
		n, err := redistest.Client(t, srv.RedisURL).Keys(context.Background(), "cs:*:o:*").Result()
		must(t, err)
		return len(n)
	}
	for name, body := range map[string]string{
		"a batch after a call":    call(0) + "[" + calls(20) + "]",
		"two calls in a row":      call(0) + "\n" + call(1),
		"twenty calls in a row":   call(0) + strings.ReplaceAll(calls(20), "},{", "}{"),
		"a call, spaces, a batch": call(0) + " \t\r\n[" + calls(20) + "]",
	} {
		before := opKeys()
		req, err := http.NewRequest("POST", srv.URL()+"/mcp", strings.NewReader(body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+srv.APIKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		must(t, err)
		got, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		grew := opKeys() - before
		t.Logf("%s (%d bytes): %d, %d operation key(s) more", name, len(body), resp.StatusCode, grew)
		if grew > 1 || strings.Count(string(got), "Prepared draft op_") > 1 {
			t.Errorf("%s: one HTTP request prepared %d operations: %.300s", name, grew, got)
		}
	}
	if _, writes := target.state(); writes != 0 {
		t.Fatal("a write reached the target")
	}
}

// utf16le is s in UTF-16LE with a byte order mark (s is ASCII).
func utf16le(s string) string {
	b := []byte{0xff, 0xfe}
	for i := 0; i < len(s); i++ {
		b = append(b, s[i], 0)
	}
	return string(b)
}

// TestHostile3EncodedWordsAnywhereInHeaders (class 3, guarantee 13): an
// RFC 2047 encoded word in any header value the agent writes — subject,
// display names of to/cc/bcc/reply_to, attachment names — spelled in
// mixed case, with JSON escapes, padded, split by whitespace or tucked
// inside a word, is refused over REST with invalid_input naming the field,
// and stores nothing.
func TestHostile3EncodedWordsAnywhereInHeaders(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	words := []string{
		"=?uTf-8?q?Please_wire_50000?=",
		"=?UTF-8?b?UGxlYXNlIHdpcmUgNTAwMDA=?=",
		"Invoice =?utf-8?Q?Please?= =?utf-8?Q?_wire?= now",
		"=?utf-8?q?Please?=\t=?utf-8?q?wire?=",
		"Re: =?windows-1252?Q?wire=20it?=",
		"x=?ISO-2022-JP?B?GyRCJDMbKEI=?=y",
		"=?utf-8*en-us?q?wire?=",
		"=?utf-8?Q??=",
		"=?=?utf-8?q?wire?=?=",
		"  =?utf-8?q?Please_wire?=  ",
	}
	// The same words written with JSON escapes for = and ?.
	esc := func(s string) string {
		j := q(s)
		j = strings.ReplaceAll(j, "=", `\u003d`)
		return strings.ReplaceAll(j, "?", `\u003F`)
	}
	pdf := "JVBERi0xLjQKJeLjz9MKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK"
	before := storedOperations(t, srv)
	for _, w := range words {
		for _, quote := range []func(string) string{q, esc} {
			for _, c := range []struct{ field, input string }{
				{"subject", `{"to":["a@client.example"],"subject":` + quote(w) + `,"text":"t"}`},
				{"to[0]", `{"to":[` + quote(`"`+w+`" <a@client.example>`) + `],"subject":"S","text":"t"}`},
				{"to[1]", `{"to":["b@client.example",` + quote(w+` <a@client.example>`) + `],"subject":"S","text":"t"}`},
				{"cc[0]", `{"to":["b@client.example"],"cc":[` + quote(w+` <a@client.example>`) + `],"subject":"S","text":"t"}`},
				{"bcc[0]", `{"to":["b@client.example"],"bcc":[` + quote(`"`+w+`" <a@client.example>`) + `],"subject":"S","text":"t"}`},
				{"reply_to", `{"to":["b@client.example"],"reply_to":` + quote(w+` <a@client.example>`) + `,"subject":"S","text":"t"}`},
				{"attachments[0].name", `{"to":["b@client.example"],"subject":"S","text":"t","attachments":[{"name":` + quote(strings.TrimSpace(w)+`.pdf`) + `,"content_type":"application/pdf","content_base64":"` + pdf + `"}]}`},
			} {
				st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, `{"action":"email.send","input":`+c.input+`}`)
				e := decode[apiError](t, b)
				if st != 400 || e.Error.Code != "invalid_input" {
					t.Errorf("%s %q: %d %.300s, want invalid_input", c.field, w, st, b)
					continue
				}
				fields, _ := e.Error.Details["fields"].([]any)
				named := false
				for _, f := range fields {
					if m, ok := f.(map[string]any); ok && m["field"] == "input."+c.field || ok && m["field"] == c.field {
						named = true
					}
				}
				if !named {
					t.Errorf("%s %q: the refusal does not name the field: %s", c.field, w, b)
				}
			}
		}
	}
	if after := storedOperations(t, srv); after != before {
		t.Fatalf("refused input stored %d keys", after-before)
	}
}

// mcpPost sends one raw JSON-RPC body to path with the API key.
func mcpPost(t *testing.T, srv *testService, path, body string) (int, []byte) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{}} // not the OpenAPI check: /mcp is not REST
	req, err := http.NewRequest("POST", srv.URL()+path, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+srv.APIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := client.Do(req)
	must(t, err)
	defer resp.Body.Close()
	got, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, got
}

// TestHostile3MCPBatchOnOtherPaths (class 7): a batch sent to spellings of
// the MCP path (a trailing slash, upper case, doubled or dotted segments,
// a query) is refused or not found, and prepares nothing.
func TestHostile3MCPBatchOnOtherPaths(t *testing.T) {
	srv, target := hostileService(t)
	srv.call(t, "GET", "/v1/operations", srv.APIKey, "")
	var parts []string
	for i := range 20 {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": map[string]any{
			"name": "prepare_http_request", "arguments": map[string]any{"target": "calendar", "method": "PATCH", "path": "/events/7",
				"body": map[string]any{"title": fmt.Sprint("Standup ", i)}}}})
		parts = append(parts, string(b))
	}
	batch := "[" + strings.Join(parts, ",") + "]"
	keys0, _ := redisSize(t, srv)
	for _, p := range []string{"/mcp/", "/MCP", "/Mcp", "//mcp", "/./mcp", "/v1/../mcp", "/mcp?x=1", "/mcp#x", "/mcp/x", "/%6dcp", "/mcp%2f", "/mcp;x"} {
		st, got := mcpPost(t, srv, p, batch)
		t.Logf("batch to %s: %d %.100s", p, st, got)
		if st < 400 || bytes.Contains(got, []byte("op_")) {
			t.Errorf("batch to %s: %d %.300s", p, st, got)
		}
	}
	if keys1, _ := redisSize(t, srv); keys1 != keys0 {
		t.Errorf("batches on other paths left %d keys", keys1-keys0)
	}
	if _, writes := target.state(); writes != 0 {
		t.Fatal("a write reached the target")
	}
}

// TestHostile3MCPTwoSpellingsRouteAsStored (class 2 over MCP): the
// arguments of prepare_http_request with duplicate or escaped member names
// and unusual numbers, sent as raw JSON-RPC (so the client fixes nothing
// up), are refused, or routed by exactly the body stored (what executes).
func TestHostile3MCPTwoSpellingsRouteAsStored(t *testing.T) {
	srv := startService(t, serviceOpts{Config: hostile3Config(t, "http://127.0.0.1:1"), Env: map[string]string{"CAL_TOKEN": httpreqCred}})
	srv.APIKey = httpreqAPIKey
	opRE := regexpOp
	for i, body := range []string{
		`{"amount":50,"amount":5000}`,
		`{"amount":5000,"amount":50}`,
		`{"amount":50,"\u0061mount":5000}`,
		`{"customer":{"tier":"gold"},"customer\u002etier":"platinum"}`,
		`{"customer":{"tier":"platinum"},"customer":{"tier":"gold"}}`,
		`{"customer":{"tier":"platinum","tier":"gold"}}`,
		`{"amount":123456789012345678}`,
		`{"amount":1E+4}`,
		`{"amount":1000.00000000000001}`,
		`{"amount":1e400}`,
	} {
		// Duplicates in the arguments object itself, too: body given twice.
		for j, args := range []string{
			`{"target":"billing","method":"POST","path":"/invoices","body":` + body + `}`,
			`{"target":"billing","method":"POST","path":"/invoices","body":{"amount":5000},"body":` + body + `}`,
			`{"target":"billing","method":"POST","path":"/invoices","body":` + body + `,"body":{"amount":50}}`,
		} {
			msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"prepare_http_request","arguments":%s}}`, i*10+j+1, args)
			st, got := mcpPost(t, srv, "/mcp", msg)
			key := opRE.FindString(string(got))
			if key == "" {
				if st >= 500 {
					t.Errorf("%s: %d %.300s", args, st, got)
				}
				t.Logf("%s: refused (%d %.120s)", args, st, got)
				continue
			}
			st, b := srv.call(t, "GET", "/v1/operations/"+key, srv.APIKey, "")
			if st != 200 {
				t.Fatalf("%s: %d %s", key, st, b)
			}
			o := decode[op](t, b)
			var stored struct {
				Body json.RawMessage `json:"body"`
			}
			must(t, json.Unmarshal(o.Input, &stored))
			need := requiredFor(t, stored.Body)
			t.Logf("%s: accepted, stored body %s, %d approver(s)", args, stored.Body, o.Approval.Required)
			if o.Approval.Required < need {
				t.Errorf("%s: stored (and sent) body %s needs %d approvers; the route gave %d", args, stored.Body, need, o.Approval.Required)
			}
		}
	}
}

var regexpOp = regexp.MustCompile(`op_[a-z2-7]{26}`)

// TestHostile3EncodedWordsHiddenInAddressSyntax (class 3): encoded words
// that only appear once an address is parsed (quoted pairs inside a quoted
// display name) or that sit in a comment, a group or an obsolete route are
// refused with invalid_input, or accepted only when what is stored (what
// is sent) holds no "=?" at all.
func TestHostile3EncodedWordsHiddenInAddressSyntax(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, addr := range []string{
		`"=\?utf-8\?q\?Please_wire\?\=" <a@client.example>`,
		`"=\?utf-8?q?Please_wire?=" <a@client.example>`,
		`"Ada =?utf-8?q?wire?=\"" <a@client.example>`,
		`a@client.example (=?utf-8?q?Please_wire?=)`,
		`(=?utf-8?q?wire?=) a@client.example`,
		`Ada (=?utf-8?q?wire?=) <a@client.example>`,
		`<a@client.example> (=?utf-8?q?wire?=)`,
		`=?utf-8?q?wire?=: a@client.example;`,
		`Ada <@=?utf-8?q?x?=.example:a@client.example>`,
		`"=?utf-8?q?wire?=" <"=?x?q?y?="@client.example>`,
		`Ada <a@client.example> =?utf-8?q?wire?=`,
	} {
		for _, field := range []string{"to", "reply_to"} {
			input := `{"to":[` + q(addr) + `],"subject":"S","text":"t"}`
			if field == "reply_to" {
				input = `{"to":["b@client.example"],"reply_to":` + q(addr) + `,"subject":"S","text":"t"}`
			}
			st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, `{"action":"email.send","input":`+input+`}`)
			if st == 201 {
				o := decode[op](t, b)
				t.Logf("%s %s: accepted, stored %s", field, addr, o.Input)
				if bytes.Contains(o.Input, []byte("=?")) {
					t.Errorf("%s %s: accepted with an encoded word in what is sent: %s", field, addr, o.Input)
				}
				continue
			}
			e := decode[apiError](t, b)
			if st != 400 || e.Error.Code != "invalid_input" {
				t.Errorf("%s %s: %d %s, want invalid_input", field, addr, st, b)
			}
		}
	}
}

// TestHostile3ContentEncodingInTrailer (class 1): a chunked body whose
// trailer says Content-Encoding: gzip, with a gzipped body, is never
// decompressed: without a key it is refused; with the key it is 415 or
// invalid_input, and nothing is prepared from the decompressed JSON.
func TestHostile3ContentEncodingInTrailer(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = io.WriteString(w, emailBody)
	must(t, w.Close())
	body := func(out io.Writer) {
		_, _ = fmt.Fprintf(out, "%x\r\n%s\r\n0\r\nContent-Encoding: gzip\r\n\r\n", gz.Len(), gz.Bytes())
	}
	before := storedOperations(t, srv)
	for _, key := range []string{"", srv.APIKey} {
		for _, head := range []string{
			"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nTrailer: Content-Encoding\r\n",
			"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n",
		} {
			auth := ""
			if key != "" {
				auth = "Authorization: Bearer " + key + "\r\n"
			}
			res, err := hostilehttp.Send(srv.Addr, "POST", "/v1/operations", auth, hostilehttp.Shape{Name: "trailer", Head: []byte(head), Body: body})
			must(t, err)
			t.Logf("key %t, %q: %d", key != "", head, res.Status)
			if res.Status >= 200 && res.Status < 300 || res.Status >= 500 {
				t.Errorf("a gzipped body announced in a trailer (key %t): %d", key != "", res.Status)
			}
		}
	}
	if after := storedOperations(t, srv); after != before {
		t.Fatalf("a gzipped body was decompressed and prepared: %d keys more", after-before)
	}
}

// TestHostile3EmailDuplicateMembers (class 2 for email.send): an input,
// or a request, that names a field twice (plainly or with escapes) so
// that the policy (allowed_domains, max_recipients) could read one value
// and the sender another is refused with invalid_input, or accepted only
// when every recipient stored (what is sent) passes the policy.
func TestHostile3EmailDuplicateMembers(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	srv := startService(t, serviceOpts{Config: loopConfig(1, "email"), Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	good := `["a@client.example"]`
	evil := `["x@evil.example","y@evil.example","z@evil.example","w@evil.example"]`
	in := func(to1, to2 string) string {
		return `{"to":` + to1 + `,"subject":"S","text":"t","\u0074o":` + to2 + `}`
	}
	for _, body := range []string{
		`{"action":"email.send","input":` + in(good, evil) + `}`,
		`{"action":"email.send","input":` + in(evil, good) + `}`,
		`{"action":"email.send","input":{"to":` + good + `,"to":` + evil + `,"subject":"S","text":"t"}}`,
		`{"action":"email.send","input":{"to":` + good + `,"subject":"S","text":"t"},"input":{"to":` + evil + `,"subject":"S","text":"t"}}`,
		`{"action":"email.send","input":{"to":` + evil + `,"subject":"S","text":"t"},"\u0069nput":{"to":` + good + `,"subject":"S","text":"t"}}`,
		`{"action":"email.send","input":{"to":` + good + `,"cc":` + good + `,"c\u0063":` + evil + `,"subject":"S","text":"t"}}`,
		`{"action":"email.send","input":{"to":` + good + `,"subject":"S","text":"t","attachments":[],"attachments":[{"name":"a.exe","content_type":"application/octet-stream","content_base64":"TVo="}]}}`,
	} {
		st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, body)
		if st != 201 {
			e := decode[apiError](t, b)
			t.Logf("%s: %d %s %v", body, st, e.Error.Code, e.Error.Details["rule"])
			if st >= 500 || e.Error.Code == "" {
				t.Errorf("%s: %d %s", body, st, b)
			}
			continue
		}
		o := decode[op](t, b)
		t.Logf("%s: accepted, stored %s", body, o.Input)
		if bytes.Contains(o.Input, []byte("evil.example")) || bytes.Contains(o.Input, []byte("a.exe")) && !bytes.Contains(b, []byte("warning")) {
			t.Errorf("%s: accepted, and what is sent is not what the policy passed: %s", body, o.Input)
		}
	}
}

// TestHostile3AllowanceSumSpentAsSent (class 2, the allowance form): under
// an approved allowance with a sum budget of 100 on body.amount, amounts in
// unusual spellings spend exactly what is stored (and sent), and no
// sequence of them gets an amount over what is left past the human: a
// negative amount, if it is let through at all, must not make room for
// more than 100 in all.
func TestHostile3AllowanceSumSpentAsSent(t *testing.T) {
	cfg := hostile3Config(t, "http://127.0.0.1:1")
	cfg = strings.Replace(cfg, "  - name: platinum\n", `  - name: allowances
    match: {action: allowance.grant}
    approvers: {groups: [finance]}
    notify: [console]
  - name: platinum
`, 1)
	cfg = strings.Replace(cfg, "  - name: invoices\n    match: {action: http.request, target: billing}\n    approvers: {groups: [finance]}\n",
		"  - name: invoices\n    match: {action: http.request, target: billing}\n    approvers: {groups: [finance]}\n    allowances: allow\n", 1)
	if !strings.Contains(cfg, "allowances: allow") {
		t.Fatal("the config changed: no invoices route")
	}
	cfg = strings.Replace(cfg, `scopes: ["http.request:calendar", "http.request:billing"]`, `scopes: ["http.request:calendar", "http.request:billing", "allowance.grant"]`, 1)
	srv := startService(t, serviceOpts{Config: cfg, Env: map[string]string{"CAL_TOKEN": httpreqCred}})
	srv.APIKey = httpreqAPIKey
	st, raw := srv.call(t, "POST", "/v1/allowances", srv.APIKey, `{"action":"http.request","match":{"target":["billing"]},`+
		`"budget":{"sum":{"attr":"body.amount","max":100}},"ttl":"1h","reason":"small invoices"}`)
	if st != 201 {
		t.Fatalf("request allowance: %d %s", st, raw)
	}
	g := decode[op](t, raw)
	if st, _ := newBrowser().decide(t, srv.consoleLink(t, g.Key, "grace"), "approve", ""); st != 200 {
		t.Fatalf("approve the allowance: %d", st)
	}
	srv.waitFor(t, g.Key, "succeeded")

	spent := 0.0 // what went out without a human, as stored
	// Within the budget, spent as stored: 10 + 5e-324 + 0.30000000000000004
	// + 0 + 25 + 60 + 4.6 = 99.9; then 0.2 is over what is left.
	human := map[string]bool{`-1000`: true, `-1E+3`: true, `99`: true, `100`: true, `1000`: true, `0.2`: true}
	for _, amount := range []string{`1E+1`, `5e-324`, `0.30000000000000004`, `-0`, `2.5e1`, `-1000`, `-1E+3`, `60`, `99`, `100`, `1000`, `4.6`, `0.2`} {
		body := `{"action":"http.request","input":{"target":"billing","method":"POST","path":"/invoices","body":{"amount":` + amount + `}}}`
		st, b := srv.call(t, "POST", "/v1/operations", srv.APIKey, body)
		if st != 201 {
			e := decode[apiError](t, b)
			t.Logf("amount %s: refused, %d %s %v", amount, st, e.Error.Code, e.Error.Details["rule"])
			continue
		}
		o := decode[op](t, b)
		st, b = srv.call(t, "POST", "/v1/operations/"+o.Key+"/send", srv.APIKey, "")
		if st != 202 {
			t.Fatalf("send %s: %d %s", amount, st, b)
		}
		sent := decode[op](t, b)
		var stored struct {
			Body struct {
				Amount float64 `json:"amount"`
			} `json:"body"`
		}
		must(t, json.Unmarshal(o.Input, &stored))
		t.Logf("amount %s: stored %v, %s", amount, stored.Body.Amount, sent.Status)
		if toHuman := sent.Status == "pending_approval"; toHuman != human[amount] {
			t.Errorf("amount %s (stored %v, %v spent before): %s, want a human: %t", amount, stored.Body.Amount, spent, sent.Status, human[amount])
		}
		if sent.Status == "pending_approval" {
			continue
		}
		spent += max(stored.Body.Amount, 0)
		if spent > 100 {
			t.Errorf("amount %s (stored %v) went out without a human: %v spent in all under a budget of 100", amount, stored.Body.Amount, spent)
		}
	}
}
