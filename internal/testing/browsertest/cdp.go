package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// conn is one websocket to the browser endpoint speaking the Chrome
// DevTools Protocol. Pages are reached through flattened sessions
// (Target.attachToTarget with flatten: true): every message carries the
// session id, so one socket and one reader goroutine serve every page.
//
// Wire format: requests are {"id", "method", "params", "sessionId"};
// responses echo the id with "result" or "error"; events have no id and
// carry "method" and "params".
type conn struct {
	ws     *websocket.Conn
	wmu    sync.Mutex // one writer at a time (gorilla/websocket rule)
	nextID atomic.Int64

	mu       sync.Mutex
	pending  map[int64]chan *message
	sessions map[string]func(method string, params json.RawMessage)
	err      error         // why the reader stopped
	done     chan struct{} // closed when the reader stops
}

type message struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *cdpError       `json:"error,omitempty"`
}

// cdpError is an error answer from the browser.
type cdpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data,omitempty"`
}

func (e *cdpError) Error() string {
	if e.Data != "" {
		return fmt.Sprintf("cdp error %d: %s (%s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("cdp error %d: %s", e.Code, e.Message)
}

func dial(ctx context.Context, url string) (*conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.DialContext(ctx, url, nil) // no Origin header: Chromium refuses foreign origins
	if err != nil {
		return nil, err
	}
	c := &conn{ws: ws, pending: map[int64]chan *message{},
		sessions: map[string]func(string, json.RawMessage){}, done: make(chan struct{})}
	go c.read()
	return c, nil
}

// read dispatches responses to their callers and events to their session.
// Event handlers run on this goroutine and must not block or call back.
func (c *conn) read() {
	var err error
	for {
		var m message
		if err = c.ws.ReadJSON(&m); err != nil {
			break
		}
		c.mu.Lock()
		if m.ID != 0 {
			if ch, ok := c.pending[m.ID]; ok {
				delete(c.pending, m.ID)
				ch <- &m // buffered
			}
		} else if h := c.sessions[m.SessionID]; h != nil && m.Method != "" {
			h(m.Method, m.Params)
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

// call sends method to the browser (sessionID "") or a page session, and
// decodes the result into result (if not nil).
func (c *conn) call(ctx context.Context, sessionID, method string, params, result any) error {
	id := c.nextID.Add(1)
	req := struct {
		ID        int64  `json:"id"`
		SessionID string `json:"sessionId,omitempty"`
		Method    string `json:"method"`
		Params    any    `json:"params,omitempty"`
	}{id, sessionID, method, params}
	ch := make(chan *message, 1)
	c.mu.Lock()
	if c.err != nil || isClosed(c.done) {
		c.mu.Unlock()
		return fmt.Errorf("%s: connection to the browser is closed: %v", method, c.err)
	}
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	c.wmu.Lock()
	_ = c.ws.SetWriteDeadline(deadline)
	err := c.ws.WriteJSON(req)
	c.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %w", method, m.Error)
		}
		if result != nil && len(m.Result) > 0 {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("%s: decode result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: no answer from the browser: %w", method, ctx.Err())
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return fmt.Errorf("%s: connection to the browser closed: %v", method, c.err)
	}
}

// subscribe routes the events of a session to h (nil removes it).
func (c *conn) subscribe(sessionID string, h func(method string, params json.RawMessage)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h == nil {
		delete(c.sessions, sessionID)
		return
	}
	c.sessions[sessionID] = h
}

func (c *conn) close() error {
	err := c.ws.Close()
	<-c.done
	return err
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
