// Package slack is countersign's Slack channel: it posts the approval
// message of an operation in a channel or in each approver's direct
// messages, and edits it in place as the operation moves on (buttons
// removed, outcome shown). Clicks on its buttons are handled by package
// slackapp; the two agree on the action ids and button value defined in
// blocks.go.
//
// Delivery goes through the worker's outbox: Notify and Update return a
// *approval.RetryAfterError when Slack says 429 (honouring Retry-After) and
// a plain error on 5xx or network failures, and the worker retries each
// job on its own, so a Slack outage never delays another channel.
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/editorder"
	slackgo "github.com/slack-go/slack"
)

var (
	_ approval.Notifier = (*Notifier)(nil)
	_ approval.Updater  = (*Notifier)(nil)
)

// Config builds a Notifier.
type Config struct {
	// Client is a Web API client with the bot token (chat:write,
	// im:write; channels:history, groups:history and im:history let a
	// retry find a message whose post timed out).
	Client *slackgo.Client
	Logger *slog.Logger
	// Timeout bounds each Notify and Update (default 5 s), so that a
	// Slack that hangs holds a worker only briefly.
	Timeout time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// Notifier posts and updates approval messages.
type Notifier struct {
	api     *slackgo.Client
	log     *slog.Logger
	now     func() time.Time
	timeout time.Duration

	dms   sync.Map // Slack user id → direct-message channel id
	names sync.Map // "#name" → channel id, learned from posts

	mu        sync.Mutex
	ambiguous map[string]time.Time // "op|job" → when a post's outcome was unknown

	edits *editorder.Edits
}

// New builds a Notifier.
func New(cfg Config) *Notifier {
	n := &Notifier{api: cfg.Client, log: cfg.Logger, now: cfg.Now, timeout: cfg.Timeout, ambiguous: map[string]time.Time{},
		edits: editorder.New(cfg.Now)}
	if n.timeout <= 0 {
		n.timeout = 5 * time.Second
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.now == nil {
		n.now = time.Now
	}
	return n
}

// Notify posts the approval message of one job: in the job's channel
// ("slack:#approvals" → "#approvals"), or in the direct messages of the
// job's approver ("slack:dm"). It returns the handle {"channel", "ts"}
// that Update edits later.
//
// A post can fail ambiguously (a timeout or 5xx after Slack may have
// posted). The message carries metadata naming the operation and job, and
// the next attempt of that job in this process first looks for it in the
// channel's recent history, so that such a retry does not post a second
// message. See docs/slack.md for what remains possible.
func (n *Notifier) Notify(ctx context.Context, nt approval.Notice) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	if f := nt.FollowUp; f != nil && f.Original != nil && f.Original.Handle["ts"] != "" {
		return nil, n.followUp(ctx, f, nt.Message)
	}
	channel, err := n.destination(ctx, nt)
	if err != nil {
		return nil, err
	}
	m := nt.Message
	mark := m.OperationKey + "|" + nt.Job.ID
	if since, ok := n.wasAmbiguous(mark); ok {
		if h := n.find(ctx, channel, m.OperationKey, nt.Job.ID, since); h != nil {
			n.log.Info("slack: found the message of an earlier attempt; not posting again",
				"operation", m.OperationKey, "job", nt.Job.ID)
			n.clearAmbiguous(mark)
			return h, nil
		}
	}
	text, blocks := Render(m)
	attempt := n.now()
	ch, ts, err := n.api.PostMessageContext(ctx, channel,
		slackgo.MsgOptionText(text, false),
		slackgo.MsgOptionBlocks(blocks...),
		slackgo.MsgOptionMetadata(slackgo.SlackMetadata{EventType: EventType, EventPayload: map[string]any{
			"operation_key": m.OperationKey, "job": nt.Job.ID, "payload_hash": m.PayloadHash,
		}}),
		slackgo.MsgOptionDisableLinkUnfurl(), slackgo.MsgOptionDisableMediaUnfurl(),
	)
	if err != nil {
		e, ambiguous := Classify("chat.postMessage", err)
		if ambiguous {
			n.markAmbiguous(mark, attempt)
		}
		return nil, e
	}
	n.clearAmbiguous(mark)
	if channel != ch {
		n.names.Store(channel, ch)
	}
	return map[string]string{"channel": ch, "ts": ts}, nil
}

// followUp answers the first message in its thread: a reminder, or that
// the request was escalated. The first message itself is brought up to
// date by Update. It is countersign's own text; the names in it come
// escaped from the Message. It keeps no handle: nothing edits a reply.
func (n *Notifier) followUp(ctx context.Context, f *approval.FollowUp, m approval.Message) error {
	text := "Reminder: this request is still waiting for a decision"
	if len(m.Waiting) > 0 {
		text += " from " + escape(strings.Join(m.Waiting, ", "))
	}
	text += fmt.Sprintf(". Decide before <!date^%d^{date_short_pretty} at {time}|%s>.", m.ExpiresAt.Unix(), m.ExpiresAt.UTC().Format(time.RFC1123))
	if f.Reminder == 0 {
		text = "Nobody decided in time, so this request now also goes to " + escape(strings.Join(m.Escalated, ", ")) + "."
	}
	_, _, err := n.api.PostMessageContext(ctx, f.Original.Handle["channel"], slackgo.MsgOptionText(text, false),
		slackgo.MsgOptionTS(f.Original.Handle["ts"]), slackgo.MsgOptionDisableLinkUnfurl())
	if err != nil {
		e, _ := Classify("chat.postMessage", err)
		return e
	}
	return nil
}

// destination is where a job's message goes: a channel, or the DM of the
// job's approver (opened once and remembered).
func (n *Notifier) destination(ctx context.Context, nt approval.Notice) (string, error) {
	if nt.Job.Target != "dm" {
		if nt.Job.Target == "" {
			return "", errors.New("slack: the job names no channel")
		}
		return nt.Job.Target, nil
	}
	if nt.Approver == nil || nt.Approver.SlackUserID == "" {
		return "", errors.New("slack: the approver has no slack_user_id")
	}
	user := nt.Approver.SlackUserID
	if ch, ok := n.dms.Load(user); ok {
		return ch.(string), nil
	}
	ch, _, _, err := n.api.OpenConversationContext(ctx, &slackgo.OpenConversationParameters{Users: []string{user}})
	if err != nil {
		e, _ := Classify("conversations.open", err)
		return "", e
	}
	n.dms.Store(user, ch.ID)
	return ch.ID, nil
}

var channelID = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)

// find looks for the message an ambiguous attempt may have posted. It
// needs the channel's id (a name is known only after a successful post)
// and the history scopes; without them it finds nothing.
func (n *Notifier) find(ctx context.Context, channel, key, job string, since time.Time) map[string]string {
	if !channelID.MatchString(channel) {
		id, ok := n.names.Load(channel)
		if !ok {
			return nil
		}
		channel = id.(string)
	}
	oldest := since.Add(-2 * time.Minute)
	h, err := n.api.GetConversationHistoryContext(ctx, &slackgo.GetConversationHistoryParameters{
		ChannelID: channel, Oldest: strconv.FormatInt(oldest.Unix(), 10) + ".000000", Limit: 100, IncludeAllMetadata: true,
	})
	if err != nil {
		n.log.Info("slack: cannot look for an earlier attempt's message", "operation", key, "err", err)
		return nil
	}
	for _, msg := range h.Messages {
		p := msg.Metadata.EventPayload
		if msg.Metadata.EventType == EventType && p["operation_key"] == key && p["job"] == job {
			return map[string]string{"channel": channel, "ts": msg.Timestamp}
		}
	}
	return nil
}

func (n *Notifier) wasAmbiguous(mark string) (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.ambiguous[mark]
	return t, ok
}

func (n *Notifier) markAmbiguous(mark string, at time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.ambiguous[mark]; !ok {
		n.ambiguous[mark] = at
	}
	// Forget marks older than any approval window.
	for k, t := range n.ambiguous {
		if n.now().Sub(t) > approval.MaxApprovalTTL {
			delete(n.ambiguous, k)
		}
	}
}

func (n *Notifier) clearAmbiguous(mark string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.ambiguous, mark)
}

// Update edits a delivered message to show m: the outcome, who decided
// and when; the buttons stay only while the operation is pending (a
// partial quorum). A message that is gone (deleted, channel archived) is
// left alone.
func (n *Notifier) Update(ctx context.Context, d approval.Delivery, m approval.Message) error {
	ch, ts := d.Handle["channel"], d.Handle["ts"]
	if ch == "" || ts == "" {
		return nil
	}
	// Edits of one message are serialized and never go back to an
	// earlier state (internal/editorder).
	err := n.edits.Apply(ch+"|"+ts, m, func() error {
		ctx, cancel := context.WithTimeout(ctx, n.timeout)
		defer cancel()
		text, blocks := Render(m)
		_, _, _, err := n.api.UpdateMessageContext(ctx, ch, ts, slackgo.MsgOptionText(text, false), slackgo.MsgOptionBlocks(blocks...))
		return err
	})
	if err == nil {
		return nil
	}
	var se slackgo.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "message_not_found", "cant_update_message", "channel_not_found", "is_archived", "edit_window_closed",
			"not_in_channel", "msg_too_long", "invalid_blocks":
			n.log.Warn("slack: the approval message cannot be updated; leaving it", "operation", m.OperationKey,
				"job", d.Job, "error", se.Err)
			return nil
		}
	}
	e, _ := Classify("chat.update", err)
	return e
}

// Classify turns a slack-go error into what the worker needs: a
// *approval.RetryAfterError on 429, a plain error otherwise, and whether
// Slack may have acted although the call failed (5xx, network). The
// error's text is safe to log: it carries no token.
func Classify(method string, err error) (error, bool) {
	var rl *slackgo.RateLimitedError
	if errors.As(err, &rl) {
		return &approval.RetryAfterError{After: rl.RetryAfter, Err: fmt.Errorf("slack: %s: rate limited", method)}, false
	}
	var sc slackgo.StatusCodeError
	if errors.As(err, &sc) {
		if sc.Code == http.StatusTooManyRequests {
			return &approval.RetryAfterError{Err: fmt.Errorf("slack: %s: rate limited", method)}, false
		}
		return fmt.Errorf("slack: %s: HTTP %d", method, sc.Code), sc.Code >= 500
	}
	var se slackgo.SlackErrorResponse
	if errors.As(err, &se) {
		msg := fmt.Sprintf("slack: %s: %s", method, se.Err)
		if hint := hints[se.Err]; hint != "" {
			msg += " (" + hint + ")"
		}
		if se.Err == "ratelimited" {
			return &approval.RetryAfterError{Err: errors.New(msg)}, false
		}
		if authErrors[se.Err] {
			// Nothing changes until an operator acts: retry slowly.
			return &approval.RetryAfterError{After: time.Minute, Err: errors.New(msg)}, false
		}
		return errors.New(msg), false
	}
	return fmt.Errorf("slack: %s: %w", method, err), true
}

var hints = map[string]string{
	"not_in_channel":    "invite the countersign app to the channel: /invite @countersign",
	"channel_not_found": "check the channel in the route's notify list; private channels need the app invited",
	"invalid_auth":      "check SLACK_BOT_TOKEN",
	"not_authed":        "SLACK_BOT_TOKEN is missing",
	"token_revoked":     "the app was uninstalled or its token revoked; reinstall it and update SLACK_BOT_TOKEN",
	"account_inactive":  "the app was uninstalled or its token revoked; reinstall it and update SLACK_BOT_TOKEN",
	"missing_scope":     "add the scopes of channel/slack/manifest/manifest.yml to the app and reinstall it",
	"user_not_found":    "check the approver's slack_user_id",
}

var authErrors = map[string]bool{"invalid_auth": true, "not_authed": true, "token_revoked": true,
	"account_inactive": true, "missing_scope": true}
