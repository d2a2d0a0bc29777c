package faketeams

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/channel/teams/teamscard"
)

// User is a person in the fake tenant.
type User struct {
	ID          string // "29:…"
	AADObjectID string
	Name        string
}

// Click is one press of an Action.Execute on a card.
type Click struct {
	User         User
	Verb         string
	Data         map[string]any // the action's data, with inputs merged in
	Conversation string
	ReplyToID    string // the card's activity id
	TenantID     string
	// ID is the invoke activity's id (generated when empty).
	ID string
	// ServiceURL is the activity's serviceUrl (the fake's when empty).
	ServiceURL string
	ChannelID  string // "msteams" when empty
}

// ClickOn is user pressing the verb's button on a, with reason typed in
// the reject form. The data is the card's, as Teams sends it.
func (s *Server) ClickOn(a Activity, verb string, u User, reason string) Click {
	d := map[string]any{}
	if x := FindAction(&a.Card, verb); x != nil && x.Data != nil {
		raw, _ := json.Marshal(x.Data)
		_ = json.Unmarshal(raw, &d)
	}
	if verb == teamscard.VerbReject {
		d[teamscard.ReasonInput] = reason
	}
	return Click{User: u, Verb: verb, Data: d, Conversation: a.Conversation, ReplyToID: a.ID}
}

var invokes atomic.Int64

// InvokeActivity is the invoke activity of c.
func (s *Server) InvokeActivity(c Click) []byte {
	if c.ID == "" {
		c.ID = fmt.Sprintf("f:%d%d", time.Now().UnixNano(), invokes.Add(1))
	}
	if c.ServiceURL == "" {
		c.ServiceURL = s.ServiceURL()
	}
	if c.ChannelID == "" {
		c.ChannelID = "msteams"
	}
	if c.TenantID == "" {
		c.TenantID = s.TenantID
	}
	conv := map[string]any{"id": c.Conversation, "tenantId": c.TenantID, "conversationType": "personal"}
	if strings.HasPrefix(c.Conversation, "19:") {
		conv["conversationType"] = "channel"
	}
	a := map[string]any{
		"type": "invoke", "name": "adaptiveCard/action", "id": c.ID,
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "localTimestamp": time.Now().Format(time.RFC3339Nano),
		"serviceUrl": c.ServiceURL, "channelId": c.ChannelID,
		"from":         map[string]any{"id": c.User.ID, "name": c.User.Name, "aadObjectId": c.User.AADObjectID},
		"conversation": conv,
		"recipient":    map[string]any{"id": "28:" + s.AppID, "name": "countersign"},
		"replyToId":    c.ReplyToID,
		"entities":     []any{map[string]any{"type": "clientInfo", "locale": "en-US", "country": "US", "platform": "Web"}},
		"channelData": map[string]any{"tenant": map[string]any{"id": c.TenantID}, "source": map[string]any{"name": "message"},
			"legacy": map[string]any{"replyToId": c.ReplyToID}},
		"value": map[string]any{"action": map[string]any{"type": "Action.Execute", "title": c.Verb, "verb": c.Verb,
			"data": c.Data}, "trigger": "manual"},
		"locale": "en-US",
	}
	b, _ := json.Marshal(a)
	return b
}

// Sign is who signs an invoke's token, and how (tests make bad tokens).
type Sign struct {
	// Rogue signs with a key that is not in the JWKS; OldKey with a key
	// rotated out of it.
	Rogue, OldKey bool
	// Claims changes the token's claims.
	Claims func(*TokenClaims)
	// Alg "none" or "HS256" forges an unsigned or HMAC token.
	Alg string
}

// Token is a Bot Framework token for an activity sent to serviceURL.
func (s *Server) Token(serviceURL string, how Sign) string {
	now := time.Now()
	c := TokenClaims{Issuer: Issuer, Audience: s.AppID, ServiceURL: serviceURL, IssuedAt: now.Add(-time.Minute), Expiry: now.Add(time.Hour)}
	if how.Claims != nil {
		how.Claims(&c)
	}
	std, extra := c.claims()
	switch how.Alg {
	case "none", "HS256":
		return forged(how.Alg, std, extra)
	}
	s.mu.Lock()
	k := s.channelKey
	switch {
	case how.Rogue:
		k = s.rogueKey
	case how.OldKey && len(s.retired) > 0:
		k = s.retired[len(s.retired)-1]
	}
	s.mu.Unlock()
	return k.sign(std, extra)
}

// Invoke is the HTTP request Teams sends to the bot's endpoint for c.
func (s *Server) Invoke(target string, c Click, how Sign) *http.Request {
	body := s.InvokeActivity(c)
	var a struct {
		ServiceURL string `json:"serviceUrl"`
	}
	_ = json.Unmarshal(body, &a)
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+s.Token(a.ServiceURL, how))
	req.Header.Set("User-Agent", "Microsoft-SkypeBotApi (Microsoft-BotFramework/3.0)")
	return req
}

// Response is a decoded invoke response.
type Response struct {
	HTTPStatus int
	StatusCode int    `json:"statusCode"`
	Type       string `json:"type"`
	Card       *teamscard.Card
	Raw        string
}

// ReadResponse decodes the answer to an invoke.
func ReadResponse(resp *http.Response) Response {
	b, _ := io.ReadAll(resp.Body)
	r := Response{HTTPStatus: resp.StatusCode, Raw: string(b)}
	var v struct {
		StatusCode int             `json:"statusCode"`
		Type       string          `json:"type"`
		Value      json.RawMessage `json:"value"`
	}
	if json.Unmarshal(b, &v) == nil {
		r.StatusCode, r.Type = v.StatusCode, v.Type
		if v.Type == teamscard.ContentType {
			var c teamscard.Card
			if json.Unmarshal(v.Value, &c) == nil {
				r.Card = &c
			}
		}
	}
	return r
}

// FindAction is the Action.Execute with verb anywhere in the card (also
// inside Action.ShowCard), or nil.
func FindAction(c *teamscard.Card, verb string) *teamscard.Action {
	if c == nil {
		return nil
	}
	for i := range c.Actions {
		a := &c.Actions[i]
		if a.Type == "Action.Execute" && a.Verb == verb {
			return a
		}
		if found := FindAction(a.Card, verb); found != nil {
			return found
		}
	}
	return nil
}

// Verbs lists the card's Action.Execute verbs.
func Verbs(c *teamscard.Card) []string {
	var out []string
	for _, v := range []string{teamscard.VerbApprove, teamscard.VerbReject, teamscard.VerbReview} {
		if FindAction(c, v) != nil {
			out = append(out, v)
		}
	}
	return out
}

// OpenURLs lists the card's Action.OpenUrl targets.
func OpenURLs(c *teamscard.Card) []string {
	var out []string
	for _, a := range c.Actions {
		if a.Type == "Action.OpenUrl" {
			out = append(out, a.URL)
		}
	}
	return out
}

// Text is every text of the card, one per line, for tests that look for words.
func Text(c *teamscard.Card) string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	var walk func([]teamscard.Element)
	walk = func(es []teamscard.Element) {
		for _, e := range es {
			if e.Text != "" {
				b.WriteString(e.Text + "\n")
			}
			if len(e.Inlines) > 0 {
				for _, in := range e.Inlines {
					b.WriteString(in.Text)
				}
				b.WriteString("\n")
			}
			walk(e.Items)
		}
	}
	walk(c.Body)
	for _, a := range c.Actions {
		b.WriteString("[" + a.Title + "]\n")
		if a.Card != nil {
			b.WriteString(Text(a.Card))
		}
	}
	return b.String()
}
