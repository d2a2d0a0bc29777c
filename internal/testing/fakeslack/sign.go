package fakeslack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Slack signs each request to an app with the app's signing secret:
//
//	X-Slack-Request-Timestamp: <unix seconds>
//	X-Slack-Signature: v0=hex(HMAC-SHA256(secret, "v0:" + timestamp + ":" + body))
//
// These helpers build requests exactly so, with a real HMAC.

// Signature returns the X-Slack-Signature value of body sent at ts.
func Signature(secret string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:", ts.Unix())
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// SignHeaders sets the signature headers of body sent at ts.
func SignHeaders(h http.Header, secret string, ts time.Time, body []byte) {
	h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("X-Slack-Signature", Signature(secret, ts, body))
}

// FormBody wraps an interaction payload the way Slack posts it:
// application/x-www-form-urlencoded with one field, payload.
func FormBody(payload []byte) []byte {
	return []byte(url.Values{"payload": {string(payload)}}.Encode())
}

// SignedRequest is a POST of body to target signed at ts.
func SignedRequest(target, secret string, ts time.Time, body []byte) *http.Request {
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(string(body)))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	SignHeaders(req.Header, secret, ts, body)
	return req
}

var triggers atomic.Int64

// NewTriggerID returns a fresh trigger id like Slack's.
func NewTriggerID() string {
	return fmt.Sprintf("%d.%d.fake%08x", time.Now().Unix(), triggers.Add(1), time.Now().UnixNano()&0xffffffff)
}

// Click is one button press on a message.
type Click struct {
	UserID, UserName, TeamID string
	ActionID                 string // "approve" or "reject"
	BlockID                  string
	Value                    string
	ChannelID, MessageTS     string
	// TriggerID and ActionTS are generated when empty.
	TriggerID, ActionTS string
	ResponseURL         string
}

// BlockActions is the JSON payload of a block_actions interaction, shaped
// like Slack's (including block_id, without which slack-go does not see
// the action).
func BlockActions(c Click) []byte {
	if c.TriggerID == "" {
		c.TriggerID = NewTriggerID()
	}
	if c.ActionTS == "" {
		c.ActionTS = fmt.Sprintf("%d.%06d", time.Now().Unix(), triggers.Add(1)%1000000)
	}
	if c.BlockID == "" {
		c.BlockID = "actions"
	}
	if c.UserName == "" {
		c.UserName = strings.ToLower(c.UserID)
	}
	if c.ResponseURL == "" {
		c.ResponseURL = "https://hooks.slack.test/actions/" + c.TeamID + "/1/fake"
	}
	p := map[string]any{
		"type":       "block_actions",
		"user":       map[string]any{"id": c.UserID, "username": c.UserName, "name": c.UserName, "team_id": c.TeamID},
		"api_app_id": "A0FAKE",
		"token":      "legacy-verification-token",
		"container": map[string]any{"type": "message", "message_ts": c.MessageTS, "channel_id": c.ChannelID,
			"is_ephemeral": false},
		"trigger_id":   c.TriggerID,
		"team":         map[string]any{"id": c.TeamID, "domain": "fake"},
		"channel":      map[string]any{"id": c.ChannelID, "name": "fake-channel"},
		"message":      map[string]any{"type": "message", "ts": c.MessageTS, "text": "…", "bot_id": "B0FAKE"},
		"response_url": c.ResponseURL,
		"actions": []any{map[string]any{
			"action_id": c.ActionID, "block_id": c.BlockID, "type": "button", "value": c.Value,
			"text":      map[string]any{"type": "plain_text", "text": c.ActionID, "emoji": true},
			"action_ts": c.ActionTS,
		}},
	}
	b, _ := json.Marshal(p)
	return b
}

// Submission is a modal submitted by a user.
type Submission struct {
	UserID, UserName, TeamID string
	CallbackID               string
	PrivateMetadata          string
	// Values are the inputs: block_id → action_id → typed text.
	Values map[string]map[string]string
	ViewID string
}

// ViewSubmission is the JSON payload of a view_submission interaction.
func ViewSubmission(s Submission) []byte {
	if s.UserName == "" {
		s.UserName = strings.ToLower(s.UserID)
	}
	if s.ViewID == "" {
		s.ViewID = "V0FAKE"
	}
	values := map[string]any{}
	for block, actions := range s.Values {
		m := map[string]any{}
		for action, v := range actions {
			m[action] = map[string]any{"type": "plain_text_input", "value": v}
		}
		values[block] = m
	}
	p := map[string]any{
		"type":       "view_submission",
		"team":       map[string]any{"id": s.TeamID, "domain": "fake"},
		"user":       map[string]any{"id": s.UserID, "username": s.UserName, "name": s.UserName, "team_id": s.TeamID},
		"api_app_id": "A0FAKE",
		"token":      "legacy-verification-token",
		"trigger_id": NewTriggerID(),
		"view": map[string]any{
			"id": s.ViewID, "team_id": s.TeamID, "type": "modal", "callback_id": s.CallbackID,
			"private_metadata": s.PrivateMetadata, "state": map[string]any{"values": values},
			"hash": "1.fakehash",
		},
		"response_urls": []any{},
	}
	b, _ := json.Marshal(p)
	return b
}

// OpenedView is a modal the fake was asked to open.
type OpenedView struct {
	TriggerID       string
	CallbackID      string
	PrivateMetadata string
	Raw             json.RawMessage
}

// Views returns the modals opened with views.open, in order.
func (s *Server) Views() []OpenedView {
	var out []OpenedView
	for _, c := range s.Calls("views.open") {
		if c.Status != 200 || c.Error != "" {
			continue
		}
		var req struct {
			TriggerID string `json:"trigger_id"`
			View      struct {
				CallbackID      string `json:"callback_id"`
				PrivateMetadata string `json:"private_metadata"`
			} `json:"view"`
		}
		_ = json.Unmarshal(c.JSON, &req)
		var raw struct {
			View json.RawMessage `json:"view"`
		}
		_ = json.Unmarshal(c.JSON, &raw)
		out = append(out, OpenedView{TriggerID: req.TriggerID, CallbackID: req.View.CallbackID,
			PrivateMetadata: req.View.PrivateMetadata, Raw: raw.View})
	}
	return out
}

// Ephemeral is an ephemeral message the fake was asked to show.
type Ephemeral struct {
	Channel, User, Text string
}

// Ephemerals returns the ephemeral messages shown to user ("" for all).
func (s *Server) Ephemerals(user string) []Ephemeral {
	var out []Ephemeral
	for _, c := range s.Calls("chat.postEphemeral") {
		if c.Error != "" || (user != "" && c.Form.Get("user") != user) {
			continue
		}
		out = append(out, Ephemeral{Channel: c.Form.Get("channel"), User: c.Form.Get("user"), Text: c.Form.Get("text")})
	}
	return out
}
