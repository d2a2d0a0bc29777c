// Package slackpost is the slack.post_message action: countersign's bot
// posts one message, exactly as the human approved it, in a channel or a
// thread. Its undo is slack.delete_message, an internal action that
// deletes a message the bot posted; prepare_undo drafts it, and it needs
// its own approval like any other operation.
//
// Input of slack.post_message:
//
//	{"channel": "#general" | "C0123456789", "text": "mrkdwn", "thread_ts": "1700000000.000100"?}
//
// Execution posts with the bot token, with link and media unfurling off
// (so the message looks as previewed), and with message metadata
// {event_type: "countersign_operation", event_payload: {operation_key,
// payload_hash, receipt}}, so that an operator settling an operation whose
// outcome is unknown can find whether the message was posted, and anyone
// reading the message can check its countersignature receipt (SPEC §9). The result records
// {channel, ts, thread_ts?}.
package slackpost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/approval"
	"github.com/slack-go/slack"
)

// Contract names.
const (
	Name       = "slack.post_message"
	DeleteName = "slack.delete_message"
	// EventType is the metadata event type of posted messages.
	EventType = "countersign_operation"
	// ReceiptAudience is the aud of the receipts of Slack effects.
	ReceiptAudience = "slack"
)

// Limits.
const (
	// MaxText is Slack's limit for a message's text (longer is truncated
	// by Slack, so it is refused here).
	MaxText = 40000
	// longText is where Slack starts advising to split a message.
	longText = 4000
)

// Input is the normalized input of slack.post_message.
type Input struct {
	Channel  string `json:"channel"`
	Text     string `json:"text"`
	ThreadTS string `json:"thread_ts,omitempty"`
}

// Result is what an executed slack.post_message records.
type Result struct {
	Channel  string `json:"channel"`
	TS       string `json:"ts"`
	ThreadTS string `json:"thread_ts,omitempty"`
}

// Config builds the actions.
type Config struct {
	// Client is a Web API client with the bot token (chat:write; the
	// history scopes let slack.delete_message show what it deletes).
	Client *slack.Client
	// AllowedChannels, when set, are the only channels messages may be
	// posted in (names "#general" or ids); others are refused with
	// policy_denied, rule channel_not_allowed.
	AllowedChannels []string
	Logger          *slog.Logger
	// Sleep waits before retrying a rate-limited call (tests).
	Sleep func(context.Context, time.Duration)
}

// Action is slack.post_message.
type Action struct {
	cfg     Config
	allowed map[string]bool
}

var (
	_ approval.Action = (*Action)(nil)
	_ approval.Undoer = (*Action)(nil)
)

// New builds slack.post_message.
func New(cfg Config) *Action {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	a := &Action{cfg: cfg}
	if len(cfg.AllowedChannels) > 0 {
		a.allowed = map[string]bool{}
		for _, c := range cfg.AllowedChannels {
			if n, ok := normalizeChannel(c); ok {
				a.allowed[n] = true
			}
		}
	}
	return a
}

// Name implements approval.Action.
func (a *Action) Name() string { return Name }

var (
	channelIDPattern   = regexp.MustCompile(`^[CGD][A-Z0-9]{8,}$`)
	channelNamePattern = regexp.MustCompile(`^#[\p{Ll}\p{Lo}\p{N}_\-]{1,80}$`)
	channelRefPattern  = regexp.MustCompile(`^<#([CG][A-Z0-9]{8,})(\|[^>]*)?>$`)
	tsPattern          = regexp.MustCompile(`^[0-9]{9,11}\.[0-9]{6}$`)
)

// normalizeChannel accepts "#name", "name", an id, or a "<#C…|name>"
// reference, and returns "#name" (lower case) or the id.
func normalizeChannel(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if m := channelRefPattern.FindStringSubmatch(s); m != nil {
		return m[1], true
	}
	if channelIDPattern.MatchString(s) {
		return s, true
	}
	name := "#" + strings.ToLower(strings.TrimPrefix(s, "#"))
	if channelNamePattern.MatchString(name) {
		return name, true
	}
	return "", false
}

// Prepare validates and normalizes the input and renders the preview:
// the exact text, how it will read in Slack, and warnings for what a
// reader might miss (mentions that notify people, links whose label hides
// their address). It reads nothing from Slack.
//
// Returns invalid_input, or policy_denied (rule channel_not_allowed).
func (a *Action) Prepare(_ context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	var in Input
	if err := decodeInput(req.Input, &in); err != nil {
		return nil, err
	}
	var fe approval.FieldErrors
	channel, ok := normalizeChannel(in.Channel)
	switch {
	case strings.TrimSpace(in.Channel) == "":
		fe.Add("channel", "required: a channel name such as #general, or an id such as C0123456789")
	case !ok:
		fe.Add("channel", "must be a channel name such as #general (lower case, no spaces) or an id such as C0123456789")
	}
	switch {
	case strings.TrimSpace(in.Text) == "":
		fe.Add("text", "required and must not be blank")
	case !utf8.ValidString(in.Text):
		fe.Add("text", "must be valid UTF-8")
	case utf8.RuneCountInString(in.Text) > MaxText:
		fe.Add("text", "is %d characters; Slack allows at most %d", utf8.RuneCountInString(in.Text), MaxText)
	}
	in.ThreadTS = strings.TrimSpace(in.ThreadTS)
	if in.ThreadTS != "" && !tsPattern.MatchString(in.ThreadTS) {
		fe.Add("thread_ts", "must be a Slack message timestamp such as 1700000000.000100")
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	if a.allowed != nil && !a.allowed[channel] {
		return nil, approval.PolicyDenied("channel_not_allowed", "posting in %s is not allowed on this service", channel)
	}
	in.Channel = channel
	return &approval.Prepared{Input: in, Preview: Preview(in), Attrs: map[string]string{"channel": channel}}, nil
}

// Preview renders a stored input again (approval.Previewer): the preview
// is a function of the normalized input alone.
func (a *Action) Preview(input json.RawMessage) (approval.Preview, error) {
	var in Input
	if err := decodeInput(input, &in); err != nil {
		return approval.Preview{}, err
	}
	return Preview(in), nil
}

var _ approval.Previewer = (*Action)(nil)

// Preview renders the input for humans and the agent.
func Preview(in Input) approval.Preview {
	p := approval.Preview{
		Title: "Post a Slack message in " + in.Channel,
		Summary: "countersign's Slack app posts this message in " + in.Channel +
			", exactly as written, with Slack formatting (mrkdwn); everyone in the channel can read it. Links are not unfurled.",
		Fields: []approval.Field{{Name: "channel", Label: "Channel", Value: in.Channel}},
	}
	if in.ThreadTS != "" {
		p.Title = "Reply in a Slack thread in " + in.Channel
		p.Summary = "countersign's Slack app posts this reply in the thread of message " + in.ThreadTS + " in " + in.Channel +
			", exactly as written, with Slack formatting (mrkdwn). Links are not unfurled."
		p.Fields = append(p.Fields, approval.Field{Name: "thread_ts", Label: "In the thread of", Value: in.ThreadTS})
	}
	p.Fields = append(p.Fields, approval.Field{Name: "text", Label: "Message (as written)", Value: in.Text, Long: true})
	shown, notes := render(in.Text)
	if shown != in.Text {
		p.Fields = append(p.Fields, approval.Field{Name: "appears_as", Label: "Appears in Slack as", Value: shown, Long: true})
	}
	p.Warnings = append(p.Warnings, notes...)
	if n := utf8.RuneCountInString(in.Text); n > longText {
		p.Warnings = append(p.Warnings, fmt.Sprintf("long message: %d characters (Slack advises at most %d)", n, longText))
	}
	return p
}

var (
	refPattern    = regexp.MustCompile(`<([^<>]*)>`)
	entityDecoder = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")
)

// render shows mrkdwn the way a reader sees its special parts (mentions,
// channel references, links, dates), and notes what might surprise: who
// gets notified, and links whose label is not their address. Emphasis
// markers are left as written.
func render(text string) (string, []string) {
	var broadcast, people []string
	var disguised []string
	shown := refPattern.ReplaceAllStringFunc(text, func(m string) string {
		inner := m[1 : len(m)-1]
		target, label, hasLabel := strings.Cut(inner, "|")
		switch {
		case strings.HasPrefix(target, "@"):
			people = append(people, target[1:])
			if hasLabel {
				return "@" + strings.TrimPrefix(label, "@")
			}
			return target
		case strings.HasPrefix(target, "#"):
			if hasLabel {
				return "#" + label
			}
			return target
		case strings.HasPrefix(target, "!"):
			cmd := target[1:]
			switch {
			case cmd == "channel" || cmd == "here" || cmd == "everyone":
				broadcast = append(broadcast, "@"+cmd)
				return "@" + cmd
			case strings.HasPrefix(cmd, "subteam^"):
				people = append(people, "group "+strings.TrimPrefix(cmd, "subteam^"))
				if hasLabel {
					return label
				}
				return "@" + strings.TrimPrefix(cmd, "subteam^")
			case strings.HasPrefix(cmd, "date^") && hasLabel:
				// <!date^ts^format^link|label>: the date (or its fallback
				// label) is a link whose target the reader does not see.
				if parts := strings.SplitN(cmd, "^", 4); len(parts) == 4 && parts[3] != "" {
					link := entityDecoder.Replace(parts[3])
					disguised = append(disguised, fmt.Sprintf("a date %q → %s", entityDecoder.Replace(label), link))
					return label + " (" + link + ")"
				}
				return label
			}
			if hasLabel {
				return label
			}
			return m
		default:
			if !hasLabel {
				return target
			}
			if entityDecoder.Replace(label) != entityDecoder.Replace(target) {
				disguised = append(disguised, fmt.Sprintf("%q → %s", entityDecoder.Replace(label), entityDecoder.Replace(target)))
			}
			return label + " (" + target + ")"
		}
	})
	shown = entityDecoder.Replace(shown)
	var notes []string
	if len(broadcast) > 0 {
		notes = append(notes, "notifies everyone in the channel: "+strings.Join(uniq(broadcast), ", "))
	}
	if len(people) > 0 {
		notes = append(notes, "mentions and notifies: "+strings.Join(uniq(people), ", "))
	}
	if len(disguised) > 0 {
		notes = append(notes, "links whose text differs from where they go: "+strings.Join(uniq(disguised), "; "))
	}
	return shown, notes
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// Execute posts the stored message once. A rate-limited post (429) was not
// carried out by Slack, so it is retried after Retry-After (up to three
// times, waits of at most 30 s); nothing else is retried.
func (a *Action) Execute(ctx context.Context, op *approval.Operation) (json.RawMessage, error) {
	var in Input
	if err := json.Unmarshal(op.Input, &in); err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "stored input is unreadable"}
	}
	payload := map[string]any{"operation_key": op.Key, "payload_hash": op.PayloadHash}
	tok, err := approval.CountersignerFrom(ctx).Mint(approval.ReceiptRequest{Audience: ReceiptAudience})
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "could not sign the receipt; nothing was posted"}
	}
	if tok != "" {
		payload["receipt"] = tok
	}
	opts := []slack.MsgOption{
		slack.MsgOptionText(in.Text, false),
		slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl(),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: EventType, EventPayload: payload}),
	}
	if in.ThreadTS != "" {
		opts = append(opts, slack.MsgOptionTS(in.ThreadTS))
	}
	var ch, ts string
	err = a.retryRateLimited(ctx, func() error {
		// The claim is re-checked right before each post (approval/fence.go).
		if err := approval.CheckClaim(ctx); err != nil {
			return err
		}
		var err error
		ch, ts, err = a.cfg.Client.PostMessageContext(ctx, in.Channel, opts...)
		return err
	})
	if errors.Is(err, approval.ErrClaimLost) {
		return nil, approval.ClaimLostExecError(err)
	}
	if err != nil {
		return nil, execError("post the message", op.Key, err)
	}
	return json.Marshal(Result{Channel: ch, TS: ts, ThreadTS: in.ThreadTS})
}

func (a *Action) retryRateLimited(ctx context.Context, call func() error) error {
	return retryRateLimited(ctx, a.cfg.Sleep, call)
}

func retryRateLimited(ctx context.Context, wait func(context.Context, time.Duration), call func() error) error {
	for attempt := 0; ; attempt++ {
		err := call()
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) || attempt == 3 || rl.RetryAfter > 30*time.Second || ctx.Err() != nil {
			return err
		}
		wait(ctx, max(rl.RetryAfter, time.Second))
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// execError classifies a failed call: Slack's own refusals and rate
// limits mean nothing was done; a 5xx or a network failure after the
// request left leaves the outcome unknown.
func execError(what, key string, err error) error {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		msg := "Slack refused to " + what + ": " + se.Err
		if h := hints[se.Err]; h != "" {
			msg += " (" + h + ")"
		}
		return &approval.ExecError{Code: approval.CodeExecutionFailed, Message: msg, Details: map[string]any{"slack_error": se.Err}}
	}
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "Slack rate-limited the request; nothing was done"}
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		if sc.Code == http.StatusTooManyRequests {
			return &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "Slack rate-limited the request; nothing was done"}
		}
		return &approval.ExecError{Code: approval.CodeExecutionFailed, OutcomeUnknown: true,
			Message: fmt.Sprintf("Slack answered HTTP %d: it may or may not have done it; look for a message with metadata operation_key %s before retrying", sc.Code, key)}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "could not connect to Slack; nothing was sent"}
	}
	return &approval.ExecError{Code: approval.CodeExecutionFailed, OutcomeUnknown: true,
		Message: "the request to Slack failed midway (" + safeErr(err) + "): it may or may not have been done; check Slack for operation_key " + key + " before retrying"}
}

func safeErr(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	var ue interface{ Timeout() bool }
	if errors.As(err, &ue) && ue.Timeout() {
		return "timed out"
	}
	return "connection error"
}

var hints = map[string]string{
	"not_in_channel":      "invite the countersign app to the channel: /invite @countersign",
	"channel_not_found":   "no such channel visible to the app",
	"is_archived":         "the channel is archived",
	"thread_not_found":    "no such thread",
	"msg_too_long":        "the message is too long",
	"restricted_action":   "the workspace does not let the app post there",
	"invalid_auth":        "check SLACK_BOT_TOKEN",
	"token_revoked":       "the app's token was revoked",
	"missing_scope":       "add the scopes of channel/slack/manifest/manifest.yml and reinstall the app",
	"cant_delete_message": "the app can only delete messages it posted",
	"message_not_found":   "the message is gone",
}

// UndoInput drafts the deletion of the posted message: slack.delete_message
// with the channel id and ts recorded at execution. Returns invalid_state
// when the operation did not post a message.
func (a *Action) UndoInput(_ context.Context, op *approval.Operation) (string, json.RawMessage, error) {
	var r Result
	if op.Action != Name || len(op.Result) == 0 || json.Unmarshal(op.Result, &r) != nil || r.Channel == "" || r.TS == "" {
		return "", nil, approval.Errorf(approval.CodeInvalidState, "operation %s has no posted Slack message to delete", op.Key)
	}
	in, err := json.Marshal(DeleteInput{Channel: r.Channel, TS: r.TS, ThreadTS: r.ThreadTS})
	return DeleteName, in, err
}

func decodeInput(raw json.RawMessage, v any) error {
	return approval.DecodeInput(raw, v, "must be a JSON object with string fields")
}
