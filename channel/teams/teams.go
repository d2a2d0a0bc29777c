// Package teams is countersign's Microsoft Teams channel: a bot that
// posts each operation's approval card (an Adaptive Card built from the
// channel-neutral message, channel/teams/teamscard) in each approver's 1:1 chat
// ("teams", proactively, by teams_user_id) or as a new post in a channel
// ("teams:19:…@thread.tacv2"), and edits it in place on every state
// change. Clicks on its buttons are handled by package teamsapp.
//
// Delivery goes through the worker's outbox like every channel: Notify
// and Update return a *approval.RetryAfterError when Teams says 429
// (honouring Retry-After) or the credentials are refused, and a plain
// error on 5xx or network failures; the worker retries each job on its
// own, so a Teams outage never delays another channel.
package teams

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/teams/teamscard"
	"github.com/countersign/countersign/internal/editorder"
)

var (
	_ approval.Notifier = (*Notifier)(nil)
	_ approval.Updater  = (*Notifier)(nil)
)

// Via is the channel name of Teams decisions and deliveries.
const Via = "teams"

// Config builds a Notifier.
type Config struct {
	Connector *Connector
	Logger    *slog.Logger
	// Timeout bounds each Notify and Update (default 10 s).
	Timeout time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// Notifier posts and updates approval cards.
type Notifier struct {
	conn    *Connector
	log     *slog.Logger
	timeout time.Duration
	now     func() time.Time
	chats   sync.Map // teams_user_id → 1:1 conversation id
	edits   *editorder.Edits
}

// New builds a Notifier.
func New(cfg Config) *Notifier {
	n := &Notifier{conn: cfg.Connector, log: cfg.Logger, timeout: cfg.Timeout, now: cfg.Now, edits: editorder.New(cfg.Now)}
	if n.timeout <= 0 {
		n.timeout = 10 * time.Second
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.now == nil {
		n.now = time.Now
	}
	return n
}

// Notify posts the approval card of one job: a new post in the job's
// channel, or a message in the 1:1 chat of the job's approver. It returns
// the handle {"conversation", "activity"} that Update edits later.
//
// A post has no idempotency key: one whose answer is lost (a timeout, a
// 5xx after the fact) may be posted again by the retry. Both cards carry
// the same buttons and a decision counts once; only the recorded one is
// edited (docs/teams.md).
func (n *Notifier) Notify(ctx context.Context, nt approval.Notice) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	act := activity(nt.Message)
	if channel := nt.Job.Target; channel != "" {
		r, err := n.conn.CreateConversation(ctx, ConversationParameters{
			IsGroup: true, Activity: &act, ChannelData: n.channelData(channel),
		})
		if err != nil {
			return nil, Classify(err)
		}
		return map[string]string{"conversation": r.ID, "activity": r.ActivityID}, nil
	}
	if nt.Approver == nil || nt.Approver.TeamsUserID == "" {
		return nil, errors.New("teams: the approver has no teams_user_id")
	}
	chat, err := n.chat(ctx, nt.Approver.TeamsUserID)
	if err != nil {
		return nil, err
	}
	id, err := n.conn.SendActivity(ctx, chat, act)
	if err != nil {
		return nil, Classify(err)
	}
	return map[string]string{"conversation": chat, "activity": id}, nil
}

// chat is the 1:1 conversation with a person, created once (Teams returns
// the existing one) and remembered.
func (n *Notifier) chat(ctx context.Context, user string) (string, error) {
	if id, ok := n.chats.Load(user); ok {
		return id.(string), nil
	}
	r, err := n.conn.CreateConversation(ctx, ConversationParameters{
		Bot: &Account{ID: "28:" + n.conn.AppID()}, Members: []Account{{ID: user}},
		TenantID: n.conn.TenantID(), ChannelData: n.channelData(""),
	})
	if err != nil {
		return "", Classify(err)
	}
	n.chats.Store(user, r.ID)
	return r.ID, nil
}

func (n *Notifier) channelData(channel string) map[string]any {
	d := map[string]any{}
	if t := n.conn.TenantID(); t != "" {
		d["tenant"] = map[string]string{"id": t}
	}
	if channel != "" {
		d["channel"] = map[string]string{"id": channel}
	}
	return d
}

// Update edits a delivered card to show m: the outcome, who decided and
// when; the buttons stay only while the operation is pending. A card that
// is gone (deleted, the chat left) is left alone.
//
// Edits of one card are serialized and never go back to an earlier state
// (internal/editorder).
func (n *Notifier) Update(ctx context.Context, d approval.Delivery, m approval.Message) error {
	conv, id := d.Handle["conversation"], d.Handle["activity"]
	if conv == "" || id == "" {
		return nil
	}
	err := n.edits.Apply(conv+"|"+id, m, func() error {
		ctx, cancel := context.WithTimeout(ctx, n.timeout)
		defer cancel()
		return n.conn.UpdateActivity(ctx, conv, id, activity(m))
	})
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusGone) {
		n.log.Warn("teams: the approval card cannot be updated; leaving it", "operation", m.OperationKey,
			"job", d.Job, "status", ae.Status, "code", ae.Code)
		return nil
	}
	if err != nil {
		return Classify(err)
	}
	return nil
}

// activity is the message holding m's card. Its summary (what
// notifications show) is countersign's own words only.
func activity(m approval.Message) Activity {
	card, _ := teamscard.Render(m, nil)
	summary := "Approval needed: " + m.Action + " (" + m.ShortHash() + ")"
	if m.Status != approval.StatusPending {
		summary = "countersign: " + m.Action + " is " + string(m.Status)
	}
	return Activity{Type: "message", Summary: summary,
		Attachments: []teamscard.Attachment{{ContentType: teamscard.ContentType, Content: card}}}
}

// Classify turns a connector error into what the worker needs: a
// *approval.RetryAfterError on 429 and on refused credentials (nothing
// changes until an operator acts), a plain error otherwise. Its text is
// safe to log: it carries no password or token.
func Classify(err error) error {
	var ae *APIError
	if !errors.As(err, &ae) {
		return err
	}
	msg := ae.Error()
	if hint := hintFor(ae); hint != "" {
		msg += " (" + hint + ")"
	}
	switch {
	case ae.Status == http.StatusTooManyRequests:
		return &approval.RetryAfterError{After: ae.RetryAfter, Err: errors.New(msg)}
	case ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden || ae.Op == "login" && ae.Status/100 == 4:
		return &approval.RetryAfterError{After: max(ae.RetryAfter, time.Minute), Err: errors.New(msg)}
	}
	return errors.New(msg)
}

func hintFor(ae *APIError) string {
	switch {
	case ae.Op == "login":
		return "check TEAMS_APP_ID, TEAMS_APP_PASSWORD and TEAMS_TENANT_ID"
	case ae.Status == http.StatusUnauthorized:
		return "the Bot Connector refused the token: check the bot's app id and tenant"
	case ae.Status == http.StatusForbidden || ae.Status == http.StatusNotFound && ae.Op == "create conversation":
		return "install the countersign app for this person or in this team (docs/teams.md), and check teams_user_id or the channel id"
	}
	return ""
}
