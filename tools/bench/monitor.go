package main

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Round trips per request, counted with MONITOR on the private Redis:
// every command a client sends is one line; the commands a script runs
// inside Redis are marked [… lua] and are not round trips. Background work
// (queue reads, timers, the expiry sweep, the audit sealer) names only
// shard-wide keys; a request's commands name its operation (":o:op_…"),
// the principal's counters or index, or an idempotency binding.

type monitor struct {
	conn  net.Conn
	mu    sync.Mutex
	lines []monLine
}

type monLine struct {
	at   time.Time // Redis's timestamp (same machine, same clock)
	text string
}

func startMonitor(addr string) (*monitor, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	m := &monitor{conn: conn}
	go func() {
		r := bufio.NewReaderSize(conn, 1<<20)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(strings.TrimPrefix(line, "+"), "\r\n")
			sec, _, ok := strings.Cut(line, " ")
			f, perr := strconv.ParseFloat(sec, 64)
			if !ok || perr != nil {
				continue // +OK
			}
			at := time.Unix(0, int64(f*1e9))
			m.mu.Lock()
			m.lines = append(m.lines, monLine{at: at, text: line})
			m.mu.Unlock()
		}
	}()
	return m, nil
}

func (m *monitor) close() { m.conn.Close() }

// window returns the client commands (not script-internal) between from
// and to that belong to a request.
func (m *monitor) window(from, to time.Time) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, l := range m.lines {
		if l.at.Before(from) || l.at.After(to) {
			continue
		}
		_, rest, _ := strings.Cut(l.text, " ")
		if strings.HasPrefix(rest, "[") && strings.Contains(rest[:strings.IndexByte(rest, ']')+1], "lua") {
			continue // run by a script, inside its round trip
		}
		if requestLine(rest) {
			out = append(out, shorten(rest))
		}
	}
	return out
}

// requestLine reports whether a command names a key of a request rather
// than only shard-wide ones.
func requestLine(s string) bool {
	for _, k := range []string{":o:op_", ":p:bench-agent", ":pi:bench-agent", ":ik:", ":e:op_", "cs:changes", ":l:op_"} {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

func shorten(s string) string {
	if _, rest, ok := strings.Cut(s, "] "); ok {
		s = rest
	}
	if len(s) > 110 {
		s = s[:110] + "…"
	}
	return s
}

// trips is the round trips of one kind of request.
type trips struct {
	What     string
	Commands []string
	Want     int // the target, 0 when there is none
}

// countTrips runs each request in a quiet moment and counts its commands.
func countTrips(addr string, c *client, pt *parties) ([]trips, error) {
	m, err := startMonitor(addr)
	if err != nil {
		return nil, err
	}
	defer m.close()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)

	var out []trips
	measure := func(what string, want, status int, method, path string, body []byte) ([]byte, error) {
		time.Sleep(300 * time.Millisecond) // let background work settle
		from := time.Now()
		c.api(req, method, path, body)
		if err := c.do(req, resp, status); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		to := time.Now()
		time.Sleep(100 * time.Millisecond) // lines still on their way
		out = append(out, trips{What: what, Commands: m.window(from, to), Want: want})
		return append([]byte(nil), resp.Body()...), nil
	}
	ik := fmt.Sprintf(`{"action":"email.send","idempotency_key":"bench-%d","input":{"to":["client@client.example"],"subject":"idempotent","text":"Benchmark.\n"}}`, time.Now().UnixNano())
	body, err := measure("prepare, no idempotency key", 1, 201, "POST", "/v1/operations", smallEmail(0, 0))
	if err != nil {
		return nil, err
	}
	key := opKeyOf(body)
	if _, err := measure("prepare, new idempotency key", 2, 201, "POST", "/v1/operations", []byte(ik)); err != nil {
		return nil, err
	}
	if _, err := measure("prepare, idempotency key replayed", 2, 200, "POST", "/v1/operations", []byte(ik)); err != nil {
		return nil, err
	}
	if _, err := measure("status read (GET, no wait)", 1, 200, "GET", "/v1/operations/"+key, nil); err != nil {
		return nil, err
	}
	if _, err := measure("long-poll that times out (wait=1)", 0, 200, "GET", "/v1/operations/"+key+"?wait=1", nil); err != nil {
		return nil, err
	}
	if _, err := measure("list (GET /v1/operations)", 0, 200, "GET", "/v1/operations", nil); err != nil {
		return nil, err
	}

	// One whole loop, workers included: every command that names the
	// operation or the principal, from prepare to the agent seeing
	// succeeded.
	time.Sleep(300 * time.Millisecond)
	l := &looper{c: c, pt: pt}
	from := time.Now()
	if _, err := l.once(0, 0); err != nil {
		return nil, fmt.Errorf("loop under MONITOR: %w", err)
	}
	to := time.Now()
	time.Sleep(300 * time.Millisecond)
	out = append(out, trips{What: "one whole loop, workers included", Commands: m.window(from, to.Add(200*time.Millisecond))})
	return out, nil
}

func opKeyOf(body []byte) string {
	s := string(body)
	i := strings.Index(s, `"operation_key":"`)
	if i < 0 {
		return ""
	}
	s = s[i+len(`"operation_key":"`):]
	j := strings.IndexByte(s, '"')
	if j < 0 {
		return ""
	}
	return s[:j]
}
