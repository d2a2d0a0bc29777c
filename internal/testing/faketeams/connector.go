package faketeams

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/countersign/countersign/channel/teams/teamscard"
)

// maxMessage is Teams' limit on a bot's message.
const maxMessage = 28 * 1024

type activityIn struct {
	Type        string `json:"type"`
	Summary     string `json:"summary"`
	Attachments []struct {
		ContentType string          `json:"contentType"`
		Content     json.RawMessage `json:"content"`
	} `json:"attachments"`
}

// card checks an activity as Teams would and returns its card.
func card(raw json.RawMessage) (teamscard.Card, json.RawMessage, string, error) {
	if len(raw) > maxMessage {
		return teamscard.Card{}, nil, "", fmt.Errorf("MessageSizeTooBig: %d bytes", len(raw))
	}
	var a activityIn
	if err := json.Unmarshal(raw, &a); err != nil || a.Type != "message" || len(a.Attachments) != 1 ||
		a.Attachments[0].ContentType != teamscard.ContentType {
		return teamscard.Card{}, nil, "", fmt.Errorf("BadArgument: not a message with one Adaptive Card")
	}
	var c teamscard.Card
	if err := json.Unmarshal(a.Attachments[0].Content, &c); err != nil || c.Type != "AdaptiveCard" || c.Version == "" {
		return teamscard.Card{}, nil, "", fmt.Errorf("BadArgument: not an Adaptive Card")
	}
	return c, a.Attachments[0].Content, a.Summary, nil
}

func badRequest(code, msg string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": msg}}
}

func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) {
	c, f := s.begin("create conversation", r)
	if failsFirst(f) {
		s.end(c, f.Status)
		answer(w, r, f, 0, nil)
		return
	}
	if !s.authorized(r) {
		s.end(c, 401)
		answer(w, r, nil, 401, badRequest("Unauthorized", "Authorization has been denied for this request."))
		return
	}
	var p struct {
		IsGroup bool `json:"isGroup"`
		Bot     *struct {
			ID string `json:"id"`
		} `json:"bot"`
		Members []struct {
			ID string `json:"id"`
		} `json:"members"`
		Activity    json.RawMessage `json:"activity"`
		ChannelData struct {
			Channel struct {
				ID string `json:"id"`
			} `json:"channel"`
			Tenant struct {
				ID string `json:"id"`
			} `json:"tenant"`
		} `json:"channelData"`
	}
	if err := json.Unmarshal(c.Body, &p); err != nil {
		s.end(c, 400)
		answer(w, r, nil, 400, badRequest("BadArgument", "not JSON"))
		return
	}
	if p.ChannelData.Tenant.ID != s.TenantID {
		s.end(c, 403)
		answer(w, r, nil, 403, badRequest("Forbidden", "tenant mismatch"))
		return
	}
	var resp map[string]any
	switch {
	case p.IsGroup && p.ChannelData.Channel.ID != "":
		cd, raw, summary, err := card(p.Activity)
		if err != nil {
			s.end(c, 400)
			answer(w, r, nil, 400, badRequest(strings.SplitN(err.Error(), ":", 2)[0], err.Error()))
			return
		}
		s.seq++
		id := fmt.Sprintf("17%011d", s.seq)
		conv := p.ChannelData.Channel.ID + ";messageid=" + id
		s.activities = append(s.activities, &Activity{Conversation: conv, ID: id, Channel: p.ChannelData.Channel.ID,
			Summary: summary, Card: cd, Raw: raw})
		resp = map[string]any{"id": conv, "activityId": id}
	case !p.IsGroup && len(p.Members) == 1 && p.Bot != nil && p.Bot.ID == "28:"+s.AppID:
		m := p.Members[0].ID
		conv, ok := s.chats[m]
		if !ok {
			conv = fmt.Sprintf("a:1fakeChat%d", len(s.chats)+1)
			s.chats[m] = conv
		}
		resp = map[string]any{"id": conv}
	default:
		s.end(c, 400)
		answer(w, r, nil, 400, badRequest("BadArgument", "a 1:1 conversation needs the bot and one member; a channel post needs channelData.channel"))
		return
	}
	s.end(c, 201)
	answer(w, r, f, 201, resp)
}

// member is the person of a 1:1 conversation. s.mu is held.
func (s *Server) member(conv string) (string, bool) {
	for m, id := range s.chats {
		if id == conv {
			return m, true
		}
	}
	return "", false
}

func (s *Server) sendActivity(w http.ResponseWriter, r *http.Request) {
	c, f := s.begin("send activity", r)
	if failsFirst(f) {
		s.end(c, f.Status)
		answer(w, r, f, 0, nil)
		return
	}
	if !s.authorized(r) {
		s.end(c, 401)
		answer(w, r, nil, 401, badRequest("Unauthorized", "Authorization has been denied for this request."))
		return
	}
	conv := r.PathValue("conv")
	member, ok := s.member(conv)
	if !ok {
		s.end(c, 404)
		answer(w, r, nil, 404, badRequest("ConversationNotFound", "Conversation not found."))
		return
	}
	cd, raw, summary, err := card(c.Body)
	if err != nil {
		s.end(c, 400)
		answer(w, r, nil, 400, badRequest(strings.SplitN(err.Error(), ":", 2)[0], err.Error()))
		return
	}
	s.seq++
	id := fmt.Sprintf("17%011d", s.seq)
	s.activities = append(s.activities, &Activity{Conversation: conv, ID: id, Member: member, Summary: summary, Card: cd, Raw: raw})
	s.end(c, 201)
	answer(w, r, f, 201, map[string]any{"id": id})
}

func (s *Server) updateActivity(w http.ResponseWriter, r *http.Request) {
	c, f := s.begin("update activity", r)
	if failsFirst(f) {
		s.end(c, f.Status)
		answer(w, r, f, 0, nil)
		return
	}
	if !s.authorized(r) {
		s.end(c, 401)
		answer(w, r, nil, 401, badRequest("Unauthorized", "Authorization has been denied for this request."))
		return
	}
	a := s.find(r.PathValue("conv"), r.PathValue("id"))
	if a == nil {
		s.end(c, 404)
		answer(w, r, nil, 404, badRequest("ActivityNotFound", "Activity not found."))
		return
	}
	cd, raw, summary, err := card(c.Body)
	if err != nil {
		s.end(c, 400)
		answer(w, r, nil, 400, badRequest(strings.SplitN(err.Error(), ":", 2)[0], err.Error()))
		return
	}
	a.Card, a.Raw, a.Summary = cd, raw, summary
	a.Updates++
	s.end(c, 200)
	answer(w, r, f, 200, map[string]any{"id": a.ID})
}
