// Package teamsapp handles what Microsoft Teams sends the countersign bot
// (POST /teams/messages): the Action.Execute clicks on approval cards
// (invoke activities named adaptiveCard/action). An activity is accepted
// only with a valid Bot Framework token (auth.go) whose serviceurl is the
// activity's. A click counts only if it was not seen before, the clicking
// user (of the configured tenant) maps to an approver of that operation
// (teams_user_id: their Teams id or Entra object id), that approver has
// not decided before, and the button's payload hash is the operation's:
// exactly Slack's rules, because both ask the domain's one rule
// (approval.MayDecide, through Service.Eligibility and DecideAs) and
// explain a refusal alike (channel/chatreply). The answer is a refreshed
// card that only the clicking user sees, saying what their click did or
// why it did nothing; the card everyone sees is edited by the workers
// (channel/teams) as the operation moves on.
//
// The card contract (verbs, data) is channel/teams/teamscard, shared with
// channel/teams.
package teamsapp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/chatreply"
	"github.com/countersign/countersign/channel/teams/teamscard"
	"github.com/countersign/countersign/internal/httpbody"
	"github.com/gofiber/fiber/v2"
)

// Via is the channel recorded with Teams decisions.
const Via = "teams"

// Service is what the handler needs of approval.Service.
type Service interface {
	// DecideAs records a decision of a human authenticated by the channel.
	DecideAs(ctx context.Context, key, approverID, via, payloadHash string, approve bool, reason string) (*approval.Operation, approval.DecideResult, error)
	// Get reads an operation (nil principal: any).
	Get(ctx context.Context, p *approval.Principal, key string) (*approval.Operation, error)
	// Eligibility says whether an approver may decide now (the domain's
	// one rule), before asking for a reason or minting a link.
	Eligibility(ctx context.Context, key, approverID, payloadHash string, how approval.Means) (*approval.Operation, error)
	// ReviewLink mints a personal approval link (a capability: never log it).
	ReviewLink(ctx context.Context, key, approverID, via, payloadHash string) (string, error)
	Policy() *approval.Policy
	Now() time.Time
}

var _ Service = (*approval.Service)(nil)

// TokenVerifier checks the Bot Framework token of an activity.
type TokenVerifier interface {
	Verify(ctx context.Context, authorization string) (*Identity, error)
}

var _ TokenVerifier = (*Verifier)(nil)

// Replays remembers activities already handled; store.Redis implements it.
type Replays interface {
	// Once reports whether name is seen for the first time within ttl.
	Once(ctx context.Context, name string, ttl time.Duration) (bool, error)
}

// Config builds a Handler.
type Config struct {
	Service  Service
	Verifier TokenVerifier
	Replays  Replays
	// TenantID, when set, is the organization whose users' clicks count.
	TenantID string
	Logger   *slog.Logger
	// DecideTimeout bounds the handling of one click (default 2.5 s).
	DecideTimeout time.Duration
	// MaxBody caps an activity (default 64 KiB).
	MaxBody int
}

// Handler serves POST /teams/messages.
type Handler struct {
	cfg   Config
	log   *slog.Logger
	rules chatreply.Replies
}

// New checks cfg and builds the handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Service == nil || cfg.Verifier == nil || cfg.Replays == nil {
		return nil, errors.New("teamsapp: service, verifier and replay store are required")
	}
	if cfg.DecideTimeout == 0 {
		cfg.DecideTimeout = 2500 * time.Millisecond
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 64 << 10
	}
	h := &Handler{cfg: cfg, log: cfg.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.rules = chatreply.Replies{Date: teamscard.Date, Log: h.log, Channel: "teams"}
	return h, nil
}

// replayTTL outlives a token's five-minute skew on both sides.
const replayTTL = 11 * time.Minute

// activity is what the handler reads of a Bot Framework activity.
type activity struct {
	Type       string `json:"type"`
	Name       string `json:"name"`
	ID         string `json:"id"`
	ServiceURL string `json:"serviceUrl"`
	ChannelID  string `json:"channelId"`
	From       struct {
		ID          string `json:"id"`
		AADObjectID string `json:"aadObjectId"`
	} `json:"from"`
	Conversation struct {
		ID       string `json:"id"`
		TenantID string `json:"tenantId"`
	} `json:"conversation"`
	ChannelData struct {
		Tenant struct {
			ID string `json:"id"`
		} `json:"tenant"`
	} `json:"channelData"`
	Value struct {
		Action struct {
			Type string         `json:"type"`
			Verb string         `json:"verb"`
			Data map[string]any `json:"data"`
		} `json:"action"`
	} `json:"value"`
}

// Handle serves one activity.
func (h *Handler) Handle(c *fiber.Ctx) error {
	// The token (a header) first, the body after (SPEC §3 guarantee 14):
	// a request without a valid token costs no read of its body.
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.DecideTimeout)
	defer cancel()
	id, err := h.cfg.Verifier.Verify(ctx, c.Get(fiber.HeaderAuthorization))
	if err != nil {
		h.log.Warn("teams: activity refused: bad token", "ip", c.IP(), "reason", err.Error())
		return problem(c, http.StatusUnauthorized, "unauthenticated", "the request does not carry a valid Bot Framework token")
	}
	body, err := httpbody.Read(c, h.cfg.MaxBody)
	if err != nil {
		var tl *httpbody.TooLargeError
		if errors.As(err, &tl) {
			return problem(c, http.StatusRequestEntityTooLarge, "payload_too_large", "the activity is too large")
		}
		return problem(c, http.StatusBadRequest, "invalid_input", "the body could not be read")
	}
	if err := approval.CheckJSONDepth(body, "activity"); err != nil {
		return problem(c, http.StatusBadRequest, "invalid_input", err.(*approval.Error).Message)
	}
	var act activity
	if err := json.Unmarshal(body, &act); err != nil {
		return problem(c, http.StatusBadRequest, "invalid_input", "the body is not an activity")
	}
	// The token is bound to the service that sent it; so is the activity.
	if !sameServiceURL(id.ServiceURL, act.ServiceURL) {
		h.log.Warn("teams: activity refused: its serviceUrl is not the token's", "ip", c.IP())
		return problem(c, http.StatusUnauthorized, "unauthenticated", "the activity's serviceUrl does not match its token")
	}
	if id.Endorsements != nil && !contains(id.Endorsements, act.ChannelID) {
		h.log.Warn("teams: activity refused: the key is not endorsed for its channel", "channel", act.ChannelID)
		return problem(c, http.StatusUnauthorized, "unauthenticated", "the token's key is not endorsed for this channel")
	}
	if act.Type != "invoke" {
		c.Status(http.StatusOK) // messages, installs, conversation updates: nothing to do
		return c.Send(nil)
	}
	if act.Name != "adaptiveCard/action" {
		return c.JSON(teamscard.ErrorResponse(http.StatusNotImplemented, "countersign answers only its cards' buttons"))
	}
	replay := act.ID
	if replay == "" {
		sum := sha256.Sum256(body)
		replay = "body:" + hex.EncodeToString(sum[:])
	}
	return c.JSON(h.click(ctx, &act, "teams-activity:"+replay))
}

func sameServiceURL(a, b string) bool {
	return a != "" && strings.EqualFold(strings.TrimRight(a, "/"), strings.TrimRight(b, "/"))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func problem(c *fiber.Ctx, status int, code, msg string) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"code": code, "message": msg}})
}

// click handles one Action.Execute and returns the card the clicking
// user sees.
func (h *Handler) click(ctx context.Context, act *activity, replay string) teamscard.InvokeResponse {
	a := act.Value.Action
	d := data(a.Data)
	first, err := h.cfg.Replays.Once(ctx, replay, replayTTL)
	if err != nil {
		h.log.Error("teams: replay check failed", "err", err)
		return h.answer(ctx, d.Operation, nil, refusal(chatreply.Unavailable), nil)
	}
	ap, why := h.approver(act)
	if !first {
		h.log.Warn("teams: replayed activity ignored", "user", act.From.ID)
		return h.answer(ctx, d.Operation, nil, nil, ap)
	}
	if d.Operation == "" || d.PayloadHash == "" || a.Type != "Action.Execute" {
		h.log.Info("teams: click refused", "user", act.From.ID, "why", "not a countersign button")
		return h.answer(ctx, "", nil, refusal(chatreply.BadButton), nil)
	}
	if ap == nil {
		return h.refuse(ctx, act, d.Operation, nil, why, nil)
	}
	switch a.Verb {
	case teamscard.VerbApprove:
		op, res, err := h.cfg.Service.DecideAs(ctx, d.Operation, ap.ID, Via, d.PayloadHash, true, "")
		if why := h.rules.Explain(op, res, err, ap); why != "" {
			return h.refuse(ctx, act, d.Operation, op, why, ap)
		}
		h.log.Info("teams: approval recorded", "operation", d.Operation, "approver", ap.ID, "outcome", string(res.Outcome))
		msg := "Your approval was recorded. countersign carries it out now, exactly as shown, once."
		if res.Outcome == approval.DecideRecorded {
			msg = fmt.Sprintf("Your approval was recorded: %d of %d approvals.", len(op.Approvals), op.Route.Required)
		}
		return h.answer(ctx, d.Operation, op, &teamscard.Note{Text: msg, Style: "good"}, ap)
	case teamscard.VerbReject:
		reason := strings.TrimSpace(d.Reason)
		if reason == "" {
			op, why := h.precheck(ctx, d.Operation, ap, d.PayloadHash, approval.InChat)
			if why != "" {
				return h.refuse(ctx, act, d.Operation, op, why, ap)
			}
			return h.answer(ctx, d.Operation, op, refusal("Please say why you reject it, so the requester can act on it. Nothing was recorded."), ap)
		}
		op, res, err := h.cfg.Service.DecideAs(ctx, d.Operation, ap.ID, Via, d.PayloadHash, false, reason)
		if why := h.rules.Explain(op, res, err, ap); why != "" {
			return h.refuse(ctx, act, d.Operation, op, why, ap)
		}
		h.log.Info("teams: rejection recorded", "operation", d.Operation, "approver", ap.ID)
		return h.answer(ctx, d.Operation, op, &teamscard.Note{Text: "Your rejection was recorded, with your reason. Nothing will be done.", Style: "good"}, ap)
	case teamscard.VerbReview:
		return h.review(ctx, act, ap, d)
	}
	return h.refuse(ctx, act, d.Operation, nil, chatreply.BadButton, ap)
}

// data reads an action's data; anything but strings reads as empty.
func data(m map[string]any) teamscard.Data {
	s := func(k string) string { v, _ := m[k].(string); return v }
	return teamscard.Data{Operation: s("op"), PayloadHash: s("hash"), Reason: s(teamscard.ReasonInput)}
}

// approver maps the clicking user to an approver, or explains why not.
func (h *Handler) approver(act *activity) (*approval.Approver, string) {
	if t := h.cfg.TenantID; t != "" {
		tenant := act.ChannelData.Tenant.ID
		if tenant == "" {
			tenant = act.Conversation.TenantID
		}
		if !strings.EqualFold(tenant, t) {
			return nil, "This Microsoft Teams organization is not the one countersign is set up for. Nothing was recorded."
		}
	}
	a := h.cfg.Service.Policy().ApproverByTeams(act.From.AADObjectID, act.From.ID)
	if a == nil {
		return nil, chatreply.NotAnApprover
	}
	return a, ""
}

// review answers a Review click of an approver: a personal approval
// link, in the card only they see.
func (h *Handler) review(ctx context.Context, act *activity, a *approval.Approver, d teamscard.Data) teamscard.InvokeResponse {
	op, why := h.precheck(ctx, d.Operation, a, d.PayloadHash, approval.OnPage)
	if why != "" {
		return h.refuse(ctx, act, d.Operation, op, why, a)
	}
	link, err := h.cfg.Service.ReviewLink(ctx, op.Key, a.ID, Via, d.PayloadHash)
	if why := h.rules.Explain(op, approval.DecideResult{Outcome: approval.DecideRecorded}, err, a); why != "" {
		return h.refuse(ctx, act, d.Operation, op, why, a)
	}
	h.log.Info("teams: personal review link sent", "operation", d.Operation, "approver", a.ID)
	return h.answer(ctx, d.Operation, op, &teamscard.Note{Style: "attention", Link: link, LinkTitle: "Open your approval page",
		Text: "This request is too long for Teams, so it is not approved here. Your personal approval page shows all of it " +
			"(only you see this; the link decides in your name, so do not forward it; opening it decides nothing)."}, a)
}

// precheck asks the domain whether approver a may decide operation key
// now, without deciding, and returns the operation and why not ("" when
// they may).
func (h *Handler) precheck(ctx context.Context, key string, a *approval.Approver, hash string, how approval.Means) (*approval.Operation, string) {
	op, err := h.cfg.Service.Eligibility(ctx, key, a.ID, hash, how)
	if err == nil {
		return op, ""
	}
	return op, h.rules.Explain(op, approval.DecideResult{}, err, a)
}

// refuse logs a refused click and answers with the reason (and the
// operation's card only when viewer is one of its approvers).
func (h *Handler) refuse(ctx context.Context, act *activity, key string, op *approval.Operation, why string, viewer *approval.Approver) teamscard.InvokeResponse {
	h.log.Info("teams: click refused", "operation", key, "user", act.From.ID, "why", why)
	return h.answer(ctx, key, op, refusal(why), viewer)
}

func refusal(why string) *teamscard.Note { return &teamscard.Note{Text: why, Style: "attention"} }

// answer is the card of operation key as it stands (op, or read now),
// with note on top, for viewer. Only an approver of the operation sees
// its card: anyone else (a non-approver, a user who maps to no approver, a
// click that names another operation) gets the note alone, which holds
// no content of the operation. Only note, too, when the operation cannot
// be read.
func (h *Handler) answer(ctx context.Context, key string, op *approval.Operation, note *teamscard.Note, viewer *approval.Approver) teamscard.InvokeResponse {
	if viewer == nil {
		op = nil
	} else if op == nil && approval.ValidOperationKey(key) {
		op, _ = h.cfg.Service.Get(ctx, nil, key)
	}
	if op != nil && !op.HasApprover(viewer.ID) {
		op = nil
	}
	if op == nil {
		if note == nil {
			note = &teamscard.Note{Text: "countersign has nothing to show for this card.", Style: "attention"}
		}
		return teamscard.CardResponse(teamscard.NoteCard(*note))
	}
	card, _ := teamscard.Render(approval.BuildMessage(op, h.cfg.Service.Policy(), h.cfg.Service.Now()), note)
	return teamscard.CardResponse(card)
}
