// Package slackapp handles Slack interactions (POST /slack/interactions):
// the Approve and Reject buttons of approval messages and the reject
// modal. A click counts only if Slack's request signature verifies (5
// minute window), the request was not seen before, the clicking user (of
// the right workspace) maps to an approver of that operation, that
// approver has not decided before, and the button's payload hash is the
// operation's. Anyone else gets an ephemeral explanation and nothing
// changes.
//
// Interactions arrive over HTTP (Handle, POST /slack/interactions, signed
// with the signing secret) or over Socket Mode (RunSocket, when the app has
// an app-level token: Slack authenticates the socket itself). Both feed the
// same handler, with the same replay dedupe and user → approver mapping;
// whether a click may count is the domain's one rule (approval.MayDecide,
// asked through Service.Eligibility and applied again by DecideAs), and
// refused clicks are explained by channel/chatreply, shared with Teams.
//
// The handler acknowledges at once: it records the decision (a few Redis
// round trips through approval.Service.DecideAs) and returns 200; the
// message is edited later by the workers (approval's sync, through the
// channel/slack Updater), and explanations and the modal are sent in the
// background.
//
// The button contract (action ids, value) is defined by channel/slack;
// this package declares the same values and the two are tested together.
package slackapp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/chatreply"
	"github.com/countersign/countersign/channel/slack/slackwire"
	"github.com/countersign/countersign/internal/httpbody"
	"github.com/gofiber/fiber/v2"
	"github.com/slack-go/slack"
)

// The button contract (channel/slack/slackwire), and the reject modal.
const (
	ActionApprove = slackwire.ActionApprove
	ActionReject  = slackwire.ActionReject
	// CallbackReject is the callback id of the reject modal.
	CallbackReject = "countersign_reject"
	// CallbackReview is the callback id of the review modal, whose
	// submit button approves.
	CallbackReview = "countersign_review"
	// ActionReview is the button of a message too long to approve from.
	ActionReview = slackwire.ActionReview
	// ActionRevoke ends an allowance in force.
	ActionRevoke = slackwire.ActionRevoke
	// ActionEdit opens the edit modal of a route with allow_edit.
	ActionEdit = slackwire.ActionEdit
	// reasonBlock and reasonAction name the modal's input.
	reasonBlock  = "reason"
	reasonAction = "reason"
	// Via is the channel recorded with Slack decisions.
	Via = "slack"
)

// modalState is the reject modal's private metadata.
type modalState struct {
	Operation   string `json:"op"`
	PayloadHash string `json:"hash"`
	Channel     string `json:"channel,omitempty"`
}

// Service is what the handler needs of approval.Service.
type Service interface {
	// DecideAs records a decision of a human authenticated by the channel.
	DecideAs(ctx context.Context, key, approverID, via, payloadHash string, approve bool, reason string) (*approval.Operation, approval.DecideResult, error)
	// Get reads an operation (nil principal: any).
	Get(ctx context.Context, p *approval.Principal, key string) (*approval.Operation, error)
	// Eligibility says whether an approver may decide now (the domain's
	// one rule), before a modal opens or a link is minted.
	Eligibility(ctx context.Context, key, approverID, payloadHash string, how approval.Means) (*approval.Operation, error)
	// ReviewLink mints a personal approval link for an approver who may
	// decide (a capability: never log it).
	ReviewLink(ctx context.Context, key, approverID, via, payloadHash string) (string, error)
	// EditableFields and Edit make an approver's new version (SPEC §10).
	EditableFields(op *approval.Operation) []approval.EditableField
	Edit(ctx context.Context, key, editor, via, payloadHash string, changes map[string]string) (*approval.Operation, error)
	// RevokeAllowanceAs ends an allowance for one of its approvers.
	RevokeAllowanceAs(ctx context.Context, id, approverID string) (*approval.Operation, error)
	Policy() *approval.Policy
	Now() time.Time
}

var _ Service = (*approval.Service)(nil)

// Replays remembers requests already handled; store.Redis implements it.
type Replays interface {
	// Once reports whether name is seen for the first time within ttl.
	Once(ctx context.Context, name string, ttl time.Duration) (bool, error)
}

// Config builds a Handler.
type Config struct {
	Service Service
	// SigningSecret verifies requests to Handle (POST /slack/interactions);
	// without it Handle refuses everything, and interactions can only
	// arrive over Socket Mode (RunSocket).
	SigningSecret string
	// Client sends ephemeral messages and opens the modal (bot token).
	Client  *slack.Client
	Replays Replays
	// TeamID and EnterpriseID, when set, are the workspace (or Enterprise
	// Grid organization) whose users' clicks count; SetTeam may set them
	// later (from auth.test). While unset, the signature and the user id
	// are what is checked.
	TeamID, EnterpriseID string
	Logger               *slog.Logger
	// DecideTimeout bounds recording a decision, to stay within Slack's
	// 3 seconds (default 2.5 s).
	DecideTimeout time.Duration
	// CallTimeout bounds each background Slack call (default 10 s).
	CallTimeout time.Duration
	// MaxBody caps an interaction's body (default 1 MiB), read only once
	// its signature's headers and timestamp are checked.
	MaxBody int
}

// Handler serves POST /slack/interactions.
type Handler struct {
	cfg   Config
	log   *slog.Logger
	rules chatreply.Replies // explains refused clicks
	team  atomic.Pointer[team]
	wg    sync.WaitGroup
}

type team struct{ id, enterprise string }

// New checks cfg and builds the handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Service == nil || cfg.Client == nil || cfg.Replays == nil {
		return nil, errors.New("slackapp: service, client and replay store are required")
	}
	if cfg.DecideTimeout == 0 {
		cfg.DecideTimeout = 2500 * time.Millisecond
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 1 << 20
	}
	h := &Handler{cfg: cfg, log: cfg.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.rules = chatreply.Replies{Date: slackDate, Escape: escape, Log: h.log, Channel: "slack"}
	if cfg.TeamID != "" || cfg.EnterpriseID != "" {
		h.SetTeam(cfg.TeamID, cfg.EnterpriseID)
	}
	return h, nil
}

// SetTeam restricts clicks to users of this workspace (or organization).
func (h *Handler) SetTeam(teamID, enterpriseID string) {
	h.team.Store(&team{id: teamID, enterprise: enterpriseID})
}

// Close waits for the background Slack calls to finish.
func (h *Handler) Close() { h.wg.Wait() }

// replayTTL outlives the signature's 5-minute window on both sides.
const replayTTL = 11 * time.Minute

// Handle serves one interaction request over HTTP.
func (h *Handler) Handle(c *fiber.Ctx) error {
	hdr := http.Header{}
	hdr.Set("X-Slack-Signature", c.Get("X-Slack-Signature"))
	hdr.Set("X-Slack-Request-Timestamp", c.Get("X-Slack-Request-Timestamp"))
	// The headers and the timestamp first (SPEC §3 guarantee 14): a
	// request without a current signature costs no read of its body.
	err := errors.New("no signing secret is configured (Socket Mode only)")
	var sv slack.SecretsVerifier
	if h.cfg.SigningSecret != "" {
		sv, err = slack.NewSecretsVerifier(hdr, h.cfg.SigningSecret)
	}
	var body []byte
	if err == nil {
		if body, err = httpbody.Read(c, h.cfg.MaxBody); err != nil {
			var tl *httpbody.TooLargeError
			if errors.As(err, &tl) {
				return problem(c, http.StatusRequestEntityTooLarge, "payload_too_large", tl.Error())
			}
			return problem(c, http.StatusBadRequest, "invalid_input", "the body could not be read")
		}
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		h.log.Warn("slack: interaction refused: bad signature", "ip", c.IP(), "reason", err.Error())
		return problem(c, http.StatusUnauthorized, "unauthenticated", "the request does not carry a valid, current Slack signature")
	}

	form, err := url.ParseQuery(string(body))
	if err != nil {
		return problem(c, http.StatusBadRequest, "invalid_input", "the body is not a form")
	}
	if form.Get("payload") == "" {
		if form.Get("ssl_check") != "" {
			return ack(c)
		}
		return problem(c, http.StatusBadRequest, "invalid_input", "no payload")
	}
	// A valid request replayed within the window is acknowledged and
	// ignored. It is known by what the signature covers (timestamp and
	// body), not by the header's spelling, which may vary (hex case).
	sum := sha256.Sum256(body)
	resp, err := h.interact([]byte(form.Get("payload")),
		"slack-interaction:"+hdr.Get("X-Slack-Request-Timestamp")+":"+hex.EncodeToString(sum[:]))
	if err != nil {
		return problem(c, http.StatusBadRequest, "invalid_input", err.Error())
	}
	if resp == nil {
		return ack(c)
	}
	return c.JSON(resp)
}

// interact handles one authenticated interaction payload, from either
// transport, and returns what to acknowledge it with: nil for an empty
// acknowledgement, or a view submission response. replayKey names the
// delivery: one seen before is acknowledged and ignored. An error means
// the payload is malformed (nothing was done).
func (h *Handler) interact(payload []byte, replayKey string) (any, error) {
	var ic slack.InteractionCallback
	if err := approval.CheckJSONDepth(payload, "payload"); err != nil {
		return nil, errors.New(err.(*approval.Error).Message)
	}
	if err := json.Unmarshal(payload, &ic); err != nil {
		return nil, errors.New("the payload is not an interaction")
	}

	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.DecideTimeout)
	defer cancel()
	first, err := h.cfg.Replays.Once(ctx, replayKey, replayTTL)
	if err != nil {
		h.log.Error("slack: replay check failed", "err", err)
		if ic.Type == slack.InteractionTypeViewSubmission {
			return modalNotice(unavailableText), nil
		}
		h.ephemeral(channelOf(&ic), ic.User.ID, unavailableText)
		return nil, nil
	}
	if !first {
		h.log.Warn("slack: replayed interaction ignored", "user", ic.User.ID, "type", string(ic.Type))
		return nil, nil
	}

	switch ic.Type {
	case slack.InteractionTypeBlockActions:
		h.blockActions(ctx, &ic)
	case slack.InteractionTypeViewSubmission:
		if resp := h.viewSubmission(ctx, &ic); resp != nil {
			return resp, nil
		}
	}
	return nil, nil
}

const unavailableText = chatreply.Unavailable

// ack is an empty 200: Slack's acknowledgement (and, for a modal
// submission, "close the modal").
func ack(c *fiber.Ctx) error {
	c.Status(http.StatusOK)
	return c.Send(nil)
}

func problem(c *fiber.Ctx, status int, code, msg string) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"code": code, "message": msg}})
}

func channelOf(ic *slack.InteractionCallback) string {
	if ic.Channel.ID != "" {
		return ic.Channel.ID
	}
	return ic.Container.ChannelID
}

// approver maps the clicking user to an approver, or explains why not.
func (h *Handler) approver(ic *slack.InteractionCallback) (*approval.Approver, string) {
	if t := h.team.Load(); t != nil {
		teamID := ic.Team.ID
		if teamID == "" {
			teamID = ic.User.TeamID
		}
		if teamID != t.id && (t.enterprise == "" || ic.Enterprise.ID != t.enterprise) {
			return nil, "This Slack workspace is not the one countersign is set up for. Nothing was recorded."
		}
	}
	a := h.cfg.Service.Policy().ApproverBySlack(ic.User.ID)
	if a == nil {
		return nil, chatreply.NotAnApprover
	}
	return a, ""
}

func (h *Handler) blockActions(ctx context.Context, ic *slack.InteractionCallback) {
	var action *slack.BlockAction
	for _, a := range ic.ActionCallback.BlockActions {
		if a.ActionID == ActionApprove || a.ActionID == ActionReject || a.ActionID == ActionReview || a.ActionID == ActionRevoke || a.ActionID == ActionEdit {
			action = a
			break
		}
	}
	if action == nil {
		return
	}
	channel, user := channelOf(ic), ic.User.ID
	var v slackwire.ButtonValue
	if err := json.Unmarshal([]byte(action.Value), &v); err != nil || v.Operation == "" || v.PayloadHash == "" {
		h.refuse(channel, user, "", chatreply.BadButton)
		return
	}
	a, why := h.approver(ic)
	if a == nil {
		h.refuse(channel, user, v.Operation, why)
		return
	}
	// Reject, Review and Edit open a modal on the operation as it is now,
	// once it is checked to still be the one the button showed.
	// The reject modal decides in Slack; Review and Edit may lead to the
	// approval page, where a step-up route's passkey is asked for.
	if open, how := map[string]func(*approval.Operation, modalState){
		ActionReject: func(op *approval.Operation, st modalState) { h.openRejectModal(ic.TriggerID, op, st) },
		ActionReview: func(op *approval.Operation, st modalState) { h.review(ctx, ic, op, a, st) },
		ActionEdit:   func(op *approval.Operation, st modalState) { h.edit(ctx, ic, op, a, st) },
	}[action.ActionID], approval.OnPage; open != nil {
		if action.ActionID == ActionReject {
			how = approval.InChat
		}
		op, why := h.precheck(ctx, v.Operation, a, v.PayloadHash, how)
		if why != "" {
			h.refuse(channel, user, v.Operation, why)
			return
		}
		open(op, modalState{Operation: v.Operation, PayloadHash: v.PayloadHash, Channel: channel})
		return
	}
	if action.ActionID == ActionRevoke {
		h.revoke(ctx, channel, user, v, a)
		return
	}
	op, res, err := h.cfg.Service.DecideAs(ctx, v.Operation, a.ID, Via, v.PayloadHash, true, "")
	if why := h.explain(op, res, err, a); why != "" {
		h.refuse(channel, user, v.Operation, why)
		return
	}
	h.log.Info("slack: approval recorded", "operation", v.Operation, "approver", a.ID, "outcome", string(res.Outcome))
}

// revoke ends an allowance for one of its approvers. Only the allowance
// the message showed (its payload hash) can be revoked by its button; the
// message loses the button when a worker brings it up to date.
func (h *Handler) revoke(ctx context.Context, channel, user string, v slackwire.ButtonValue, a *approval.Approver) {
	op, err := h.cfg.Service.Get(ctx, nil, v.Operation)
	if err != nil || op.Action != approval.GrantAction || op.PayloadHash != v.PayloadHash {
		h.refuse(channel, user, v.Operation, chatreply.BadButton)
		return
	}
	_, err = h.cfg.Service.RevokeAllowanceAs(ctx, v.Operation, a.ID)
	var refusal *approval.Refusal
	switch {
	case errors.As(err, &refusal):
		h.refuse(channel, user, v.Operation, refusal.Reason+". Nothing was changed.")
		return
	case approval.ErrorCode(err) == approval.CodeInvalidState:
		h.refuse(channel, user, v.Operation, "This allowance is no longer in force. Nothing was changed.")
		return
	case err != nil:
		h.log.Warn("slack: revocation failed", "operation", v.Operation, "approver", a.ID, "err", approval.SafeError(err))
		h.refuse(channel, user, v.Operation, "countersign could not record this now. Nothing was changed; please try again.")
		return
	}
	h.log.Info("slack: allowance revoked", "operation", v.Operation, "approver", a.ID)
}

// precheck asks the domain whether approver a may decide operation key
// now, without deciding, and returns the operation and why not ("" when
// they may). The reject modal is opened only when a rejection could be
// recorded; the submission is checked again when it is recorded.
func (h *Handler) precheck(ctx context.Context, key string, a *approval.Approver, hash string, how approval.Means) (*approval.Operation, string) {
	op, err := h.cfg.Service.Eligibility(ctx, key, a.ID, hash, how)
	if err == nil {
		return op, ""
	}
	return op, h.rules.Explain(op, approval.DecideResult{}, err, a)
}

// explain turns the result of a decision into the explanation the human
// sees, or "" when the decision counted.
func (h *Handler) explain(op *approval.Operation, res approval.DecideResult, err error, a *approval.Approver) string {
	return h.rules.Explain(op, res, err, a)
}

// refuse logs a refused click and tells the user why, privately.
func (h *Handler) refuse(channel, user, key, why string) {
	h.log.Info("slack: click refused", "operation", key, "user", user, "why", why)
	h.ephemeral(channel, user, why)
}

func (h *Handler) ephemeral(channel, user, text string) {
	if channel == "" || user == "" {
		return
	}
	h.background(func(ctx context.Context) {
		if _, err := h.cfg.Client.PostEphemeralContext(ctx, channel, user, slack.MsgOptionText(text, false)); err != nil {
			h.log.Warn("slack: could not send an ephemeral message", "user", user, "err", err)
		}
	})
}

// background runs a Slack call after the acknowledgement.
func (h *Handler) background(f func(context.Context)) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.CallTimeout)
		defer cancel()
		f(ctx)
	}()
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, true)
}

func escape(s string) string { return slackwire.Escape(s) }

func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|%s>", t.Unix(), t.UTC().Format("Jan 2, 2006 15:04 UTC"))
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
