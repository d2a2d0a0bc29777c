//go:build faults

package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// target is the API http.request writes to: items with ETags, every PATCH
// counted by its path and its Idempotency-Key whatever the answer, and
// holds that keep a re-read (GET) or a write (PATCH) in flight so that a
// test can kill the replica doing it.
type target struct {
	srv *httptest.Server

	mu       sync.Mutex
	ver      map[string]int             // item path → version (ETag "vN")
	writes   map[string]int             // item path → PATCH requests received
	byKey    map[string]int             // Idempotency-Key → PATCH requests received
	holdGet  time.Duration              // hold each GET this long (0: none)
	holdPut  time.Duration              // hold each PATCH this long before answering
	inFlight map[string]map[string]bool // item path → remote addresses of held requests
	// refuse answers the next PATCHes of an item path with a refusal
	// (429, 503) instead of applying them; refused counts them. A refused
	// request is no effect: it is not in writes (byKey counts it).
	refuse  map[string][]refusal
	refused map[string]int
}

// refusal is one refused answer: its status and Retry-After ("" for none).
type refusal struct {
	status     int
	retryAfter string
}

// refuseNext makes the next PATCHes of path answer the refusals, in order.
func (tg *target) refuseNext(path string, rs ...refusal) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.refuse[path] = append(tg.refuse[path], rs...)
}

// refusedOf returns how many PATCHes of path were refused.
func (tg *target) refusedOf(path string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.refused[path]
}

// requestsWithKey returns the PATCH requests (refused ones included) that
// carried the Idempotency-Key key.
func (tg *target) requestsWithKey(key string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.byKey[key]
}

func startTarget(t *testing.T) *target {
	tg := &target{ver: map[string]int{}, writes: map[string]int{}, byKey: map[string]int{}, inFlight: map[string]map[string]bool{},
		refuse: map[string][]refusal{}, refused: map[string]int{}}
	tg.srv = httptest.NewServer(http.HandlerFunc(tg.serve))
	t.Cleanup(tg.srv.Close)
	return tg
}

func (tg *target) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/api")
	if !strings.HasPrefix(path, "/items/") {
		http.NotFound(w, r)
		return
	}
	tg.mu.Lock()
	v, ok := tg.ver[path]
	if !ok {
		v = 1
		tg.ver[path] = v
	}
	var hold time.Duration
	switch r.Method {
	case http.MethodGet:
		hold = tg.holdGet
	case http.MethodPatch:
		tg.byKey[r.Header.Get("Idempotency-Key")]++
		if rs := tg.refuse[path]; len(rs) > 0 {
			tg.refuse[path] = rs[1:]
			tg.refused[path]++
			tg.mu.Unlock()
			if rs[0].retryAfter != "" {
				w.Header().Set("Retry-After", rs[0].retryAfter)
			}
			w.WriteHeader(rs[0].status)
			_, _ = w.Write([]byte(`{"error":"try later"}`))
			return
		}
		tg.writes[path]++
		hold = tg.holdPut
		if m := r.Header.Get("If-Match"); m != "" && m != etag(v) {
			tg.mu.Unlock()
			w.WriteHeader(http.StatusPreconditionFailed)
			return
		}
		v++
		tg.ver[path] = v
	default:
		tg.mu.Unlock()
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if hold > 0 {
		if tg.inFlight[path] == nil {
			tg.inFlight[path] = map[string]bool{}
		}
		tg.inFlight[path][r.RemoteAddr] = true
	}
	tg.mu.Unlock()
	if hold > 0 {
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		tg.mu.Lock()
		delete(tg.inFlight[path], r.RemoteAddr)
		tg.mu.Unlock()
	}
	w.Header().Set("ETag", etag(v))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"qty": v})
}

func etag(v int) string { return fmt.Sprintf(`"v%d"`, v) }

// hold sets how long GETs and PATCHes are held.
func (tg *target) hold(get, put time.Duration) {
	tg.mu.Lock()
	tg.holdGet, tg.holdPut = get, put
	tg.mu.Unlock()
}

// writesTo returns the PATCH requests received for an item path.
func (tg *target) writesTo(path string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.writes[path]
}

// heldFrom returns the remote addresses of the held requests on path.
func (tg *target) heldFrom(path string) []string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var out []string
	for a := range tg.inFlight[path] {
		out = append(out, a)
	}
	return out
}

// inFlightCount returns how many requests are held now.
func (tg *target) inFlightCount() int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	n := 0
	for _, m := range tg.inFlight {
		n += len(m)
	}
	return n
}

// ownerOf returns the replica whose process holds the client end of the
// TCP connection from remote (the address a server saw), by matching the
// socket in /proc/net/tcp against the replicas' file descriptors.
func (c *cluster) ownerOf(remote string) *replica {
	_, port, err := net.SplitHostPort(remote)
	if err != nil {
		return nil
	}
	p, _ := strconv.Atoi(port)
	inodes := socketInodes(p)
	if len(inodes) == 0 {
		return nil
	}
	for _, r := range c.replicas {
		pid := r.pid()
		if pid == 0 {
			continue
		}
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fd); err == nil && inodes[l] {
				return r
			}
		}
	}
	return nil
}

// socketInodes finds the inodes ("socket:[N]") of the local TCP sockets
// bound to port. A port may stand in several lines: an earlier connection
// on the same ephemeral port in TIME_WAIT (inode 0, owned by no process)
// can come first, which under load made the lookup miss the live one.
func socketInodes(port int) map[string]bool {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return nil
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 9 && strings.HasSuffix(fs[1], want) && fs[9] != "0" {
			out["socket:["+fs[9]+"]"] = true
		}
	}
	return out
}
