// Package fakeslack is a fake of the Slack Web API for tests: an httptest
// server that answers the methods countersign uses, keeps the messages it
// was asked to post, update and delete, and records every call, so tests
// read what arrived (slack-go's slacktest records no Web API calls).
//
//	fake := fakeslack.New(t)
//	api := slack.New("xoxb-test", slack.OptionAPIURL(fake.URL()))
//	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 500})
//	… run the code under test …
//	msgs := fake.Messages(fake.ChannelID("#approvals"))
//
// Methods: auth.test, chat.postMessage, chat.update, chat.delete,
// chat.postEphemeral, conversations.open, conversations.history,
// conversations.replies, views.open, and apps.connections.open with the
// Socket Mode WebSocket behind it (socket.go). Any other method answers
// {"ok":false,"error":"unknown_method"} and is recorded too.
//
// The package also builds interaction payloads (block_actions and
// view_submission) the way Slack sends them, signed with a real HMAC; see
// sign.go.
package fakeslack

import (
	"encoding/json"
	"fmt"
	"github.com/countersign/countersign/internal/testing/testkit"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
)

// Call is one recorded Web API call.
type Call struct {
	Method string
	// Form holds the form fields of form-encoded calls, and the top-level
	// string fields of JSON calls.
	Form url.Values
	// JSON is the body of JSON calls (views.open).
	JSON  json.RawMessage
	Token string
	// Status and Error are what the fake answered (Error is Slack's error
	// code of an {"ok":false} answer).
	Status int
	Error  string
	At     time.Time
}

// Message is a message the fake holds.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string
	Text     string
	// Blocks is the message's blocks as posted or last updated, decoded.
	Blocks    slack.Blocks
	RawBlocks string
	Metadata  *slack.SlackMetadata
	// Updates counts chat.update calls that changed it.
	Updates int
	Deleted bool
}

// Button returns the message's button with actionID, or nil.
func (m Message) Button(actionID string) *slack.ButtonBlockElement {
	for _, b := range m.Blocks.BlockSet {
		a, ok := b.(*slack.ActionBlock)
		if !ok || a.Elements == nil {
			continue
		}
		for _, e := range a.Elements.ElementSet {
			if btn, ok := e.(*slack.ButtonBlockElement); ok && btn.ActionID == actionID {
				return btn
			}
		}
	}
	return nil
}

// ActionBlockID returns the block_id of the message's first actions block.
func (m Message) ActionBlockID() string {
	for _, b := range m.Blocks.BlockSet {
		if a, ok := b.(*slack.ActionBlock); ok {
			return a.BlockID
		}
	}
	return ""
}

// AllText is the fallback text and every text object of the blocks, one
// per line, for tests that look for words.
func (m Message) AllText() string {
	var b strings.Builder
	b.WriteString(m.Text)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if t, ok := x["text"].(string); ok {
				b.WriteString("\n" + t)
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	var raw any
	if json.Unmarshal([]byte(m.RawBlocks), &raw) == nil {
		walk(raw)
	}
	return b.String()
}

// Failure is how the fake answers a call it was told to fail.
type Failure struct {
	// Status is the HTTP status (500, 503, 429, …); 0 means 200 with Error.
	Status int
	// RetryAfter is sent as Retry-After (whole seconds) when set.
	RetryAfter time.Duration
	// Error is Slack's error code for an {"ok":false} answer with status 200.
	Error string
	// AfterEffect applies the call first and then answers the failure: the
	// ambiguous case where a message was posted but the answer was lost.
	AfterEffect bool
	// Delay holds the answer this long. A Failure with only a Delay (no
	// Status other than 200, no Error) is a slow success.
	Delay time.Duration
}

func (f Failure) slowOnly() bool { return (f.Status == 0 || f.Status == 200) && f.Error == "" }

// Server is the fake Slack Web API.
type Server struct {
	srv *httptest.Server
	// Token, when set, is the only bot token accepted; others get invalid_auth.
	Token string
	// AppToken, when set, is the only app-level token apps.connections.open
	// (Socket Mode, socket.go) accepts.
	AppToken  string
	TeamID    string
	BotUserID string

	mu       sync.Mutex
	calls    []Call
	msgs     []*Message
	fails    map[string][]Failure
	channels map[string]string // "#name" → id
	seq      int64
	base     int64
	changed  chan struct{}
	socket   socketState
}

// New starts a fake that accepts any token and stops when t ends.
func New(t testing.TB) *Server {
	s := &Server{TeamID: "T0FAKE", BotUserID: "U0BOT", fails: map[string][]Failure{},
		channels: map[string]string{}, base: time.Now().Unix(), changed: make(chan struct{})}
	s.socket = socketState{tickets: map[string]bool{}, sent: map[string]time.Time{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/link/", s.serveSocket)
	mux.HandleFunc("/", s.serve)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.DropSockets)
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the API base URL, with the trailing slash slack-go expects.
func (s *Server) URL() string { return s.srv.URL + "/api/" }

// Client returns a slack-go client for the fake.
func (s *Server) Client(token string) *slack.Client {
	return slack.New(token, slack.OptionAPIURL(s.URL()))
}

// Fail makes the next n calls of method answer f.
func (s *Server) Fail(method string, n int, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fails[method] = append(s.fails[method], f)
	}
}

var idPattern = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)

// ChannelID returns the id the fake gives channel name ("#approvals" or
// "approvals"); ids are returned as they are.
func (s *Server) ChannelID(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.channelID(name)
}

func (s *Server) channelID(name string) string {
	if idPattern.MatchString(name) {
		return name
	}
	name = "#" + strings.TrimPrefix(name, "#")
	if id, ok := s.channels[name]; ok {
		return id
	}
	id := fmt.Sprintf("C%08d", len(s.channels)+1)
	s.channels[name] = id
	return id
}

// DMChannel is the id of the direct-message channel the fake opens with user.
func DMChannel(user string) string { return "D" + strings.TrimPrefix(user, "U") }

// Calls returns the recorded calls of the given methods (all when none).
func (s *Server) Calls(methods ...string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if len(methods) == 0 || contains(methods, c.Method) {
			out = append(out, c)
		}
	}
	return out
}

// Count is how many calls of method were made (failed ones included).
func (s *Server) Count(method string) int { return len(s.Calls(method)) }

// Reset forgets the recorded calls (messages stay).
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// Messages returns the messages of channel (every channel when ""),
// oldest first, deleted ones included.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs {
		if channel == "" || m.Channel == channel {
			out = append(out, *m)
		}
	}
	return out
}

// Message returns one message.
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.find(channel, ts); m != nil {
		return *m, true
	}
	return Message{}, false
}

// Wait waits until cond holds on the fake's state, checking after every
// call, and fails the test after timeout.
func (s *Server) Wait(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.WaitChange(t, timeout, "fakeslack", what, s.changedCh, cond, s.Summary)
}

// changedCh is the channel closed at the next change.
func (s *Server) changedCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// WaitCalls waits until method was called at least n times.
func (s *Server) WaitCalls(t testing.TB, method string, n int) []Call {
	t.Helper()
	s.Wait(t, 15*time.Second, fmt.Sprintf("%d %s call(s)", n, method), func() bool { return s.Count(method) >= n })
	return s.Calls(method)
}

// WaitMessage waits for a message of channel that satisfies cond.
func (s *Server) WaitMessage(t testing.TB, channel string, cond func(Message) bool) Message {
	t.Helper()
	var found Message
	s.Wait(t, 15*time.Second, "a matching message in "+channel, func() bool {
		for _, m := range s.Messages(channel) {
			if cond(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// Summary lists the recorded calls as "method(status/error)", for failures.
func (s *Server) Summary() string {
	var parts []string
	for _, c := range s.Calls() {
		p := c.Method + "(" + strconv.Itoa(c.Status)
		if c.Error != "" {
			p += "/" + c.Error
		}
		parts = append(parts, p+")")
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (s *Server) find(channel, ts string) *Message {
	for _, m := range s.msgs {
		if m.Channel == channel && m.TS == ts {
			return m
		}
	}
	return nil
}

func (s *Server) nextTS() string {
	s.seq++
	return fmt.Sprintf("%d.%06d", s.base+s.seq/1000000, s.seq%1000000)
}

// serve records the call, applies any planned failure, and answers.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	body, _ := io.ReadAll(r.Body)
	call := Call{Method: method, Form: url.Values{}, At: time.Now()}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		call.JSON = body
		var top map[string]any
		if json.Unmarshal(body, &top) == nil {
			for k, v := range top {
				if str, ok := v.(string); ok {
					call.Form.Set(k, str)
				}
			}
		}
	} else {
		call.Form, _ = url.ParseQuery(string(body))
		for k, v := range r.URL.Query() {
			call.Form[k] = v
		}
	}
	call.Token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if call.Token == "" {
		call.Token = call.Form.Get("token")
	}
	call.Form.Del("token")

	s.mu.Lock()
	var fail *Failure
	if q := s.fails[method]; len(q) > 0 {
		fail = &q[0]
		s.fails[method] = q[1:]
	}
	var status int
	var resp map[string]any
	switch {
	case method == "apps.connections.open":
		switch {
		case !strings.HasPrefix(call.Token, "xapp-"):
			status, resp = 200, errResp("not_allowed_token_type")
		case s.AppToken != "" && call.Token != s.AppToken:
			status, resp = 200, errResp("invalid_auth")
		case fail != nil && !fail.slowOnly():
			status, resp = failAnswer(*fail)
		default:
			status, resp = 200, s.openSocket()
		}
	case s.Token != "" && call.Token != s.Token:
		status, resp = 200, errResp("invalid_auth")
	case fail != nil && !fail.AfterEffect && !fail.slowOnly():
		status, resp = failAnswer(*fail)
	default:
		status, resp = s.apply(method, call)
		if fail != nil && !fail.slowOnly() {
			status, resp = failAnswer(*fail)
		}
	}
	call.Status = status
	if e, ok := resp["error"].(string); ok {
		call.Error = e
	}
	s.calls = append(s.calls, call)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()

	if fail != nil && fail.Delay > 0 {
		select {
		case <-time.After(fail.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if fail != nil && fail.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(fail.RetryAfter.Round(time.Second)/time.Second)))
	}
	if status != 200 {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "<html><body>fakeslack: "+http.StatusText(status)+"</body></html>")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(resp)
}

func failAnswer(f Failure) (int, map[string]any) {
	if f.Status != 0 && f.Status != 200 {
		return f.Status, map[string]any{"ok": false, "error": fmt.Sprintf("http_%d", f.Status)}
	}
	code := f.Error
	if code == "" {
		code = "fatal_error"
	}
	return 200, errResp(code)
}

func errResp(code string) map[string]any { return map[string]any{"ok": false, "error": code} }

// apply carries out one call on the fake's state. s.mu is held.
func (s *Server) apply(method string, c Call) (int, map[string]any) {
	f := c.Form
	switch method {
	case "auth.test":
		return 200, map[string]any{"ok": true, "url": "https://fake.slack.test/", "team": "Fake Team",
			"user": "countersign", "team_id": s.TeamID, "user_id": s.BotUserID, "bot_id": "B0FAKE"}

	case "chat.postMessage":
		if f.Get("channel") == "" {
			return 200, errResp("channel_not_found")
		}
		if f.Get("text") == "" && f.Get("blocks") == "" {
			return 200, errResp("no_text")
		}
		if utf8.RuneCountInString(f.Get("text")) > 40000 {
			return 200, errResp("msg_too_long")
		}
		m := &Message{Channel: s.channelID(f.Get("channel")), TS: s.nextTS(), ThreadTS: f.Get("thread_ts"), Text: f.Get("text")}
		if err := setBlocks(m, f); err != nil {
			return 200, errResp("invalid_blocks")
		}
		if raw := f.Get("metadata"); raw != "" {
			var md slack.SlackMetadata
			if json.Unmarshal([]byte(raw), &md) != nil {
				return 200, errResp("invalid_metadata_format")
			}
			m.Metadata = &md
		}
		if m.ThreadTS != "" {
			if p := s.find(m.Channel, m.ThreadTS); p == nil || p.Deleted {
				return 200, errResp("thread_not_found")
			}
		}
		s.msgs = append(s.msgs, m)
		return 200, map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS,
			"message": map[string]any{"type": "message", "text": m.Text, "ts": m.TS, "thread_ts": m.ThreadTS, "bot_id": "B0FAKE"}}

	case "chat.update":
		m := s.find(f.Get("channel"), f.Get("ts"))
		if m == nil || m.Deleted {
			return 200, errResp("message_not_found")
		}
		if _, ok := f["text"]; ok {
			m.Text = f.Get("text")
		}
		if _, ok := f["blocks"]; ok {
			if err := setBlocks(m, f); err != nil {
				return 200, errResp("invalid_blocks")
			}
		}
		m.Updates++
		return 200, map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "text": m.Text}

	case "chat.delete":
		m := s.find(f.Get("channel"), f.Get("ts"))
		if m == nil || m.Deleted {
			return 200, errResp("message_not_found")
		}
		m.Deleted = true
		return 200, map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS}

	case "chat.postEphemeral":
		if f.Get("channel") == "" || f.Get("user") == "" {
			return 200, errResp("channel_not_found")
		}
		return 200, map[string]any{"ok": true, "message_ts": s.nextTS()}

	case "conversations.open":
		users := f.Get("users")
		if users == "" || strings.Contains(users, ",") {
			return 200, errResp("not_enough_users")
		}
		return 200, map[string]any{"ok": true, "channel": map[string]any{"id": DMChannel(users)}}

	case "conversations.history":
		ch := f.Get("channel")
		var out []map[string]any
		for i := len(s.msgs) - 1; i >= 0; i-- {
			m := s.msgs[i]
			if m.Channel != ch || m.Deleted || (m.ThreadTS != "" && m.ThreadTS != m.TS) {
				continue
			}
			if !tsWithin(m.TS, f.Get("oldest"), f.Get("latest"), f.Get("inclusive") == "1" || f.Get("inclusive") == "true") {
				continue
			}
			out = append(out, wireMessage(m, f.Get("include_all_metadata") == "1"))
		}
		return 200, map[string]any{"ok": true, "messages": limit(out, f.Get("limit")), "has_more": false}

	case "conversations.replies":
		ch, parent := f.Get("channel"), f.Get("ts")
		var out []map[string]any
		for _, m := range s.msgs {
			if m.Channel != ch || m.Deleted || (m.TS != parent && m.ThreadTS != parent) {
				continue
			}
			if !tsWithin(m.TS, f.Get("oldest"), f.Get("latest"), f.Get("inclusive") == "1" || f.Get("inclusive") == "true") {
				continue
			}
			out = append(out, wireMessage(m, f.Get("include_all_metadata") == "1"))
		}
		if len(out) == 0 {
			return 200, errResp("thread_not_found")
		}
		return 200, map[string]any{"ok": true, "messages": limit(out, f.Get("limit")), "has_more": false}

	case "views.open":
		var req struct {
			TriggerID string          `json:"trigger_id"`
			View      json.RawMessage `json:"view"`
		}
		if json.Unmarshal(c.JSON, &req) != nil || req.TriggerID == "" {
			return 200, errResp("invalid_arguments")
		}
		var view map[string]any
		_ = json.Unmarshal(req.View, &view)
		if view == nil {
			return 200, errResp("invalid_arguments")
		}
		if checkView(view) != nil {
			return 200, errResp("invalid_arguments")
		}
		view["id"] = fmt.Sprintf("V%08d", len(s.calls)+1)
		return 200, map[string]any{"ok": true, "view": view}
	}
	return 404, errResp("unknown_method")
}

func setBlocks(m *Message, f url.Values) error {
	raw := f.Get("blocks")
	if raw != "" {
		if err := checkBlocks(json.RawMessage(raw), 50); err != nil {
			return err
		}
	}
	m.RawBlocks = raw
	m.Blocks = slack.Blocks{}
	if raw == "" {
		return nil
	}
	return json.Unmarshal([]byte(raw), &m.Blocks)
}

func wireMessage(m *Message, metadata bool) map[string]any {
	w := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "bot_id": "B0FAKE"}
	if m.ThreadTS != "" {
		w["thread_ts"] = m.ThreadTS
	}
	if metadata && m.Metadata != nil {
		w["metadata"] = m.Metadata
	}
	if m.RawBlocks != "" {
		w["blocks"] = json.RawMessage(m.RawBlocks)
	}
	return w
}

func tsWithin(ts, oldest, latest string, inclusive bool) bool {
	v := tsMicros(ts)
	if oldest != "" {
		o := tsMicros(oldest)
		if v < o || (!inclusive && v == o) {
			return false
		}
	}
	if latest != "" {
		l := tsMicros(latest)
		if v > l || (!inclusive && v == l) {
			return false
		}
	}
	return true
}

// tsMicros reads a Slack timestamp ("1700000000.000123") exactly.
func tsMicros(ts string) int64 {
	sec, frac, _ := strings.Cut(ts, ".")
	s, _ := strconv.ParseInt(sec, 10, 64)
	frac = (frac + "000000")[:6]
	f, _ := strconv.ParseInt(frac, 10, 64)
	return s*1000000 + f
}

func limit(ms []map[string]any, n string) []map[string]any {
	if ms == nil {
		ms = []map[string]any{}
	}
	if k, err := strconv.Atoi(n); err == nil && k > 0 && k < len(ms) {
		return ms[:k]
	}
	return ms
}
