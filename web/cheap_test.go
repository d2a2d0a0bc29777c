package web_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/hostilehttp"
	"github.com/countersign/countersign/web"
)

// Refusing is cheap (SPEC §3 guarantee 14): these tests send real requests
// over TCP to the edge on a real listener.

// headerAuthMount is a mounted net/http handler that, like /mcp,
// authenticates from the headers and only then reads the body.
type headerAuthMount struct {
	calls, reads atomic.Int64
	lastBody     atomic.Int64
}

func (m *headerAuthMount) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.calls.Add(1)
	if r.Header.Get("Authorization") != "Bearer mount-key" {
		http.Error(w, "who are you", http.StatusUnauthorized)
		return
	}
	m.reads.Add(1)
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	m.lastBody.Store(int64(len(b)))
	w.WriteHeader(http.StatusOK)
}

func cheapEnv(t *testing.T) (*pageEnv, *headerAuthMount, string) {
	m := &headerAuthMount{}
	e := newPageEnv(t, pageOpts{mounts: []web.Mount{{Method: "POST", Path: "/mount", HTTP: m, BodyLimit: 64 << 10}}})
	return e, m, strings.TrimPrefix(e.base, "http://")
}

// hostileRoutes are the edge's kinds of endpoint: header-authenticated
// (REST, admin, a mounted handler), pages (a link, the inbox), probes and
// metrics, and no route at all.
var hostileRoutes = []struct{ method, path string }{
	{"POST", "/v1/operations"},
	{"POST", "/v1/admin/operations/op_x/cancel"},
	{"POST", "/mount"},
	{"POST", "/a/k1.b3BfeHxncmFjZXxlbWFpbHwxfG4.sig"},
	{"POST", "/inbox/op_x"},
	{"POST", "/signout"},
	{"GET", "/healthz"},
	{"GET", "/metrics"},
	{"POST", "/nowhere"},
}

// TestContentEncodingRefusedFirst: any Content-Encoding but identity is
// answered 415 (invalid_input, details.rule content_encoding) on every
// route, authenticated or not, before the handler runs.
func TestContentEncodingRefusedFirst(t *testing.T) {
	_, m, addr := cheapEnv(t)
	for _, enc := range []string{"gzip", "gzip, gzip", "deflate", "br", "identity, gzip", "GZIP", "x-unknown", ""} {
		for _, r := range hostileRoutes {
			for _, auth := range []string{"", "Authorization: Bearer " + pageAgentKey + "\r\n"} {
				st, hdr, body := rawCall(t, addr, r.method+" "+r.path, auth+"Content-Encoding: "+enc+"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n", "{}")
				if st != http.StatusUnsupportedMediaType {
					t.Errorf("%s %s with Content-Encoding %q: %d, want 415", r.method, r.path, enc, st)
					continue
				}
				if strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
					var e struct {
						Error struct {
							Code    string         `json:"code"`
							Details map[string]any `json:"details"`
						} `json:"error"`
					}
					if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != "invalid_input" || e.Error.Details["rule"] != "content_encoding" {
						t.Errorf("%s %s: 415 body %s", r.method, r.path, body)
					}
				}
			}
		}
	}
	if n := m.calls.Load(); n != 0 {
		t.Errorf("the mounted handler ran %d times for encoded bodies", n)
	}
	// identity (and no header) pass on to the handler.
	for _, h := range []string{"Content-Encoding: identity\r\n", ""} {
		if st, _, _ := rawCall(t, addr, "POST /v1/operations", h+"Content-Length: 2\r\n", "{}"); st != http.StatusUnauthorized {
			t.Errorf("%q: %d, want 401", h, st)
		}
	}
}

// TestAuthenticateBeforeReadingTheBody: a header-authenticated endpoint
// answers an unauthenticated request that declares 1 GiB and sends 16 KiB
// of it (fasthttp waits for the first 8 KiB) at once, and closes the
// connection (the rest of its body is unread); authenticated, a
// declared length over the limit is 413 at once, a chunked body past the
// limit 413 too, and a body within it works.
func TestAuthenticateBeforeReadingTheBody(t *testing.T) {
	sixteenK := strings.Repeat("a", 16<<10)
	_, m, addr := cheapEnv(t)
	for _, path := range []string{"/v1/operations", "/v1/admin/operations/op_x/cancel", "/mount"} {
		start := time.Now()
		st, hdr, _ := rawCall(t, addr, "POST "+path, "Content-Type: application/json\r\nContent-Length: 1073741824\r\n", sixteenK)
		if st != http.StatusUnauthorized || time.Since(start) > 3*time.Second {
			t.Errorf("POST %s, no key, 1 GiB declared, 16 KiB sent: %d after %s, want 401 at once", path, st, time.Since(start))
		}
		if !strings.EqualFold(hdr.Get("Connection"), "close") {
			t.Errorf("POST %s: the connection stays open over an unread body (Connection: %q)", path, hdr.Get("Connection"))
		}
	}
	auth := "Authorization: Bearer " + pageAgentKey + "\r\n"
	if st, _, body := rawCall(t, addr, "POST /v1/operations", auth+"Content-Length: 1073741824\r\n", sixteenK); st != http.StatusRequestEntityTooLarge || !strings.Contains(body, "payload_too_large") {
		t.Errorf("authenticated, 1 GiB declared: %d %s, want 413 at once", st, body)
	}
	chunk := strings.Repeat("a", 32<<10)
	var chunked strings.Builder
	for i := 0; i < 10; i++ { // 320 KiB > 256 KiB
		fmt.Fprintf(&chunked, "%x\r\n%s\r\n", len(chunk), chunk)
	}
	chunked.WriteString("0\r\n\r\n")
	if st, _, body := rawCall(t, addr, "POST /v1/operations", auth+"Transfer-Encoding: chunked\r\n", chunked.String()); st != http.StatusRequestEntityTooLarge {
		t.Errorf("authenticated, chunked 320 KiB: %d %s, want 413", st, body)
	}
	if st, _, _ := rawCall(t, addr, "POST /mount", "Authorization: Bearer mount-key\r\nContent-Length: 100000\r\n", strings.Repeat("b", 100000)); st != http.StatusRequestEntityTooLarge {
		t.Errorf("mounted handler, 100000 bytes over its 64 KiB: %d, want 413", st)
	}
	if st, _, _ := rawCall(t, addr, "POST /mount", "Authorization: Bearer mount-key\r\nTransfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"); st != http.StatusOK || m.lastBody.Load() != 5 {
		t.Errorf("mounted handler, 5 bytes chunked: %d, read %d bytes", st, m.lastBody.Load())
	}
	if st, _, body := rawCall(t, addr, "POST /v1/operations", auth+"Content-Length: 2\r\n", "{}"); st != http.StatusBadRequest || !strings.Contains(body, "action") {
		t.Errorf("authenticated {}: %d %s, want 400 naming action", st, body)
	}
}

// TestUnreadBodyDoesNotReachTheNextRequest: a refused request's small
// body is discarded and the connection serves the next request; its bytes
// are never parsed as a request of their own.
func TestUnreadBodyDoesNotReachTheNextRequest(t *testing.T) {
	_, _, addr := cheapEnv(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	smuggled := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	first := "POST /v1/operations HTTP/1.1\r\nHost: x\r\nContent-Length: " + fmt.Sprint(len(smuggled)) + "\r\n\r\n" + smuggled
	second := "GET /nowhere-else HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(conn, first+second); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var got []int
	for i := 0; i < 3; i++ {
		if i == 2 { // a third answer would be the body's
			_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		got = append(got, resp.StatusCode)
	}
	if fmt.Sprint(got) != "[401 404]" {
		t.Errorf("answers on one connection: %v, want [401 404] (the body's request must not be served)", got)
	}
}

// TestRefusingCostsLittleMemory sends every hostile shape, four at once,
// to every kind of route, and measures what the process allocated and its
// peak heap: a compression bomb, a 1 GiB or endless body, a slow body,
// huge headers or a multipart form may cost a refusal only a small fixed
// amount.
func TestRefusingCostsLittleMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("sends ~300 hostile requests")
	}
	_, m, addr := cheapEnv(t)
	shapes := hostilehttp.Shapes()
	// Warm up: pools, templates, the first request of each route.
	for _, r := range hostileRoutes {
		rawCall(t, addr, r.method+" "+r.path, "Content-Length: 2\r\n", "{}")
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stopPeak := hostilehttp.HeapPeak()
	const parallel = 4
	requests := 0
	var slowest time.Duration
	for _, sh := range shapes {
		for _, r := range hostileRoutes {
			var wg sync.WaitGroup
			results := make([]hostilehttp.Result, parallel)
			for i := range parallel {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := hostilehttp.Send(addr, r.method, r.path, "", sh)
					if err != nil {
						t.Errorf("%s to %s %s: %v", sh.Name, r.method, r.path, err)
					}
					results[i] = res
				}()
			}
			wg.Wait()
			requests += parallel
			for _, res := range results {
				if res.Status >= 200 && res.Status < 300 && r.path != "/healthz" && r.path != "/metrics" && r.path != "/signout" {
					t.Errorf("%s to %s %s: %d", sh.Name, r.method, r.path, res.Status)
				}
				if strings.HasPrefix(sh.Name, "bomb") && res.Status != http.StatusUnsupportedMediaType {
					t.Errorf("%s to %s %s: %d, want 415", sh.Name, r.method, r.path, res.Status)
				}
				slowest = max(slowest, res.Took)
			}
		}
	}
	peak := stopPeak()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	growth := int64(peak) - int64(before.HeapInuse)
	t.Logf("%d hostile requests (%d shapes × %d routes × %d at once): allocated %.1f MiB in all, %.1f KiB a request; peak heap %.1f MiB over the %.1f MiB before; slowest answer %s",
		requests, len(shapes), len(hostileRoutes), parallel, float64(alloc)/(1<<20), float64(alloc)/float64(requests)/1024,
		float64(growth)/(1<<20), float64(before.HeapInuse)/(1<<20), slowest.Round(time.Millisecond))
	if perRequest := alloc / uint64(requests); perRequest > 64<<10 {
		t.Errorf("a refused request allocated %d bytes on average; the bound is 64 KiB", perRequest)
	}
	if growth > 16<<20 {
		t.Errorf("the heap grew by %d bytes under %d hostile requests at once; the bound is 16 MiB", growth, parallel)
	}
	if n := m.reads.Load(); n != 0 {
		t.Errorf("the mounted handler read %d unauthenticated bodies", n)
	}
}

// rawCall sends one request over a new connection and returns the
// answer's status, headers and body.
func rawCall(t *testing.T, addr, line, headers, body string) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = io.WriteString(conn, line+" HTTP/1.1\r\nHost: "+addr+"\r\n"+headers+"\r\n"+body) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	defer resp.Body.Close()
	if resp.Close { // net/http takes Connection: close out of the headers
		resp.Header.Set("Connection", "close")
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b)
}

// TestPageReadsItsFormAfterTheLink: an approval page checks its link
// before reading the form (a forged link declaring 1 GiB is answered at
// once), and a valid link's form over 128 KiB is 413 with nothing decided.
func TestPageReadsItsFormAfterTheLink(t *testing.T) {
	e, _, addr := cheapEnv(t)
	op, tokens := e.pending("Retro")
	forged := tokens[0][:len(tokens[0])-4] + "AAAA"
	start := time.Now()
	st, _, _ := rawCall(t, addr, "POST /a/"+forged, "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1073741824\r\n", strings.Repeat("a", 16<<10))
	if st != http.StatusNotFound || time.Since(start) > 3*time.Second {
		t.Errorf("forged link, 1 GiB form: %d after %s, want 404 at once", st, time.Since(start))
	}
	form := "decision=approve&_csrf=x&reason=" + strings.Repeat("a", 200<<10)
	st, _, body := rawCall(t, addr, "POST /a/"+tokens[0], "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: "+fmt.Sprint(len(form))+"\r\n", form)
	if st != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than") {
		t.Errorf("valid link, 200 KiB form: %d %.300s, want 413", st, body)
	}
	if got := e.status(op.Key); got.Status != approval.StatusPending {
		t.Errorf("after a refused form the operation is %s", got.Status)
	}
}
