package fakeslack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Socket Mode (https://docs.slack.dev/apis/events-api/using-socket-mode):
// the app calls apps.connections.open with its app-level token (xapp-…)
// and gets a single-use WebSocket URL; Slack sends a hello, then
// envelopes ({envelope_id, type, payload, accepts_response_payload}) that
// the app must acknowledge within 3 seconds by sending back
// {envelope_id, payload?}. Slack pings the socket; a dropped socket is
// the app's to reopen. The fake does all of it, and records each ack and
// how long it took.

// SocketAck is an acknowledgement the fake received.
type SocketAck struct {
	EnvelopeID string
	// Payload is the ack's payload (a view submission's response), or nil.
	Payload json.RawMessage
	// Latency is the time from sending the envelope to receiving the ack.
	Latency time.Duration
	// Connection is the number of the connection it came on (1 = first).
	Connection int
}

type socketState struct {
	mu      sync.Mutex
	tickets map[string]bool
	conns   []*socketConn
	count   int
	sent    map[string]time.Time
	acks    []SocketAck
	seq     int
	changed chan struct{}
}

type socketConn struct {
	n    int
	ws   *websocket.Conn
	wmu  sync.Mutex
	done chan struct{}
}

func (c *socketConn) write(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteJSON(v)
}

// openSocket answers apps.connections.open: a single-use ticket URL. s.mu is held.
func (s *Server) openSocket() map[string]any {
	ss := &s.socket
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.seq++
	ticket := fmt.Sprintf("fake-ticket-%d-%d", time.Now().UnixNano(), ss.seq)
	ss.tickets[ticket] = true
	u := "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/link/?ticket=" + ticket + "&app_id=A0FAKE"
	return map[string]any{"ok": true, "url": u}
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// serveSocket is the WebSocket endpoint.
func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	ss := &s.socket
	ticket := r.URL.Query().Get("ticket")
	ss.mu.Lock()
	ok := ss.tickets[ticket]
	delete(ss.tickets, ticket) // single use, like Slack's
	ss.mu.Unlock()
	if !ok {
		http.Error(w, "invalid ticket", http.StatusUnauthorized)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	ss.mu.Lock()
	ss.count++
	c := &socketConn{n: ss.count, ws: ws, done: make(chan struct{})}
	ss.conns = append(ss.conns, c)
	ss.mu.Unlock()
	defer func() {
		close(c.done)
		_ = ws.Close()
		s.socketChanged()
	}()
	if c.write(map[string]any{"type": "hello", "num_connections": 1,
		"debug_info":      map[string]any{"host": "applink-fake", "build_number": 1, "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": "A0FAKE"}}) != nil {
		return
	}
	s.socketChanged()
	// Slack pings; a client that hears no ping reconnects.
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-t.C:
				c.wmu.Lock()
				err := ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
				c.wmu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
	for {
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if err := ws.ReadJSON(&ack); err != nil {
			return
		}
		ss.mu.Lock()
		a := SocketAck{EnvelopeID: ack.EnvelopeID, Connection: c.n}
		if len(ack.Payload) > 0 && string(ack.Payload) != "null" {
			a.Payload = ack.Payload
		}
		if at, ok := ss.sent[ack.EnvelopeID]; ok {
			a.Latency = time.Since(at)
		}
		ss.acks = append(ss.acks, a)
		ss.mu.Unlock()
		s.socketChanged()
	}
}

func (s *Server) socketChanged() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// live is the newest open connection, or nil.
func (ss *socketState) live() *socketConn {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for i := len(ss.conns) - 1; i >= 0; i-- {
		select {
		case <-ss.conns[i].done:
		default:
			return ss.conns[i]
		}
	}
	return nil
}

// SocketConnections is how many Socket Mode connections were opened.
func (s *Server) SocketConnections() int {
	s.socket.mu.Lock()
	defer s.socket.mu.Unlock()
	return s.socket.count
}

// WaitSocket waits until the n-th connection is open.
func (s *Server) WaitSocket(t testing.TB, n int) {
	t.Helper()
	s.Wait(t, 30*time.Second, fmt.Sprintf("Socket Mode connection %d", n), func() bool {
		return s.SocketConnections() >= n && s.socket.live() != nil && s.socket.live().n >= n
	})
}

var envelopes int64

// SocketSend sends an envelope of type typ ("interactive", "events_api",
// "disconnect") with payload on the live connection and returns its id.
// id, when not empty, is used as the envelope id (a redelivery).
func (s *Server) SocketSend(t testing.TB, typ string, payload []byte, id string) string {
	t.Helper()
	c := s.socket.live()
	if c == nil {
		t.Fatal("fakeslack: no Socket Mode connection is open")
	}
	s.socket.mu.Lock()
	if id == "" {
		s.socket.seq++
		id = fmt.Sprintf("fake-envelope-%d-%d", time.Now().UnixNano(), s.socket.seq)
	}
	s.socket.sent[id] = time.Now()
	s.socket.mu.Unlock()
	env := map[string]any{"envelope_id": id, "type": typ, "accepts_response_payload": typ == "interactive",
		"retry_attempt": 0, "retry_reason": ""}
	if payload != nil {
		env["payload"] = json.RawMessage(payload)
	}
	if typ == "disconnect" {
		env = map[string]any{"type": "disconnect", "reason": "refresh_requested",
			"debug_info": map[string]any{"host": "applink-fake"}}
	}
	if err := c.write(env); err != nil {
		t.Fatalf("fakeslack: send envelope: %v", err)
	}
	return id
}

// Acks returns the acknowledgements of envelope id ("" for all).
func (s *Server) Acks(id string) []SocketAck {
	s.socket.mu.Lock()
	defer s.socket.mu.Unlock()
	var out []SocketAck
	for _, a := range s.socket.acks {
		if id == "" || a.EnvelopeID == id {
			out = append(out, a)
		}
	}
	return out
}

// WaitAck waits for the acknowledgement of envelope id.
func (s *Server) WaitAck(t testing.TB, id string) SocketAck {
	t.Helper()
	var got SocketAck
	s.Wait(t, 10*time.Second, "the ack of "+id, func() bool {
		acks := s.Acks(id)
		if len(acks) > 0 {
			got = acks[0]
			return true
		}
		return false
	})
	return got
}

// DropSockets cuts every open Socket Mode connection without a close
// handshake, as a network failure would.
func (s *Server) DropSockets() {
	s.socket.mu.Lock()
	conns := append([]*socketConn(nil), s.socket.conns...)
	s.socket.mu.Unlock()
	for _, c := range conns {
		_ = c.ws.UnderlyingConn().Close()
	}
}
