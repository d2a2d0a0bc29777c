package slackpost

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/countersign/countersign/approval"
	"github.com/slack-go/slack"
)

// slack.delete_message is internal: it is what prepare_undo drafts for a
// succeeded slack.post_message (SPEC lists only the three public actions;
// agents reach this one through undo, or directly with the scope
// slack.delete_message). Input:
//
//	{"channel": "C0123456789", "ts": "1700000000.000100", "thread_ts": "…"?}
//
// Prepare reads the message (conversations.history, or .replies in a
// thread) so that the human sees what will be deleted, and binds the
// operation to its text: if the message was edited or deleted since, the
// undo is refused (stale_state) and nothing is deleted.

// DeleteInput is the normalized input of slack.delete_message.
type DeleteInput struct {
	Channel  string `json:"channel"`
	TS       string `json:"ts"`
	ThreadTS string `json:"thread_ts,omitempty"`
}

// snapshot is the state a deletion is bound to.
type snapshot struct {
	Text   string `json:"text"`
	Edited string `json:"edited,omitempty"`
}

// Delete is slack.delete_message.
type Delete struct {
	cfg Config
}

var (
	_ approval.Action    = (*Delete)(nil)
	_ approval.Rechecker = (*Delete)(nil)
)

// NewDelete builds slack.delete_message.
func NewDelete(cfg Config) *Delete {
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	return &Delete{cfg: cfg}
}

// Name implements approval.Action.
func (d *Delete) Name() string { return DeleteName }

// Prepare validates the input and reads the message. Returns
// invalid_input; stale_state when the message is gone.
func (d *Delete) Prepare(ctx context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	var in DeleteInput
	if err := decodeInput(req.Input, &in); err != nil {
		return nil, err
	}
	var fe approval.FieldErrors
	if !channelIDPattern.MatchString(in.Channel) {
		fe.Add("channel", "must be a channel id such as C0123456789")
	}
	if !tsPattern.MatchString(in.TS) {
		fe.Add("ts", "must be a Slack message timestamp such as 1700000000.000100")
	}
	if in.ThreadTS != "" && !tsPattern.MatchString(in.ThreadTS) {
		fe.Add("thread_ts", "must be a Slack message timestamp such as 1700000000.000100")
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	p := &approval.Prepared{Input: in, Attrs: map[string]string{"channel": in.Channel}}
	p.Preview = approval.Preview{
		Title:   "Delete a Slack message in " + in.Channel,
		Summary: "countersign's Slack app deletes the message it posted at " + in.TS + " in " + in.Channel + ". A deleted message cannot be restored.",
		Fields: []approval.Field{
			{Name: "channel", Label: "Channel", Value: in.Channel},
			{Name: "ts", Label: "Message", Value: in.TS},
		},
		Warnings: []string{"irreversible: a deleted Slack message cannot be restored"},
	}
	msg, err := d.read(ctx, in)
	switch {
	case errors.Is(err, errGone):
		return nil, approval.Errorf(approval.CodeStaleState, "the Slack message %s in %s is gone: there is nothing to delete", in.TS, in.Channel)
	case err != nil:
		// Without the history scopes (or with the app out of the
		// channel) the deletion can still be approved, but blind.
		d.log().Warn("slack.delete_message: cannot read the message", "channel", in.Channel, "err", err)
		p.Preview.Warnings = append(p.Preview.Warnings,
			"countersign could not read this message ("+errText(err)+"), so its text is not shown")
		return p, nil
	}
	snap := snapshotOf(msg)
	hash, err := approval.StateHash(snap)
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(snap)
	p.State = &approval.StateBinding{Hash: hash, Snapshot: raw}
	p.Preview.Fields = append(p.Preview.Fields, approval.Field{Name: "text", Label: "Text of the message", Value: msg.Text, Long: true})
	return p, nil
}

func (d *Delete) log() interface {
	Warn(string, ...any)
} {
	if d.cfg.Logger == nil {
		return nopLog{}
	}
	return d.cfg.Logger
}

type nopLog struct{}

func (nopLog) Warn(string, ...any) {}

var errGone = errors.New("message not found")

func snapshotOf(m *slack.Message) snapshot {
	s := snapshot{Text: m.Text}
	if m.Edited != nil {
		s.Edited = m.Edited.Timestamp
	}
	return s
}

// read finds the message by channel and ts.
func (d *Delete) read(ctx context.Context, in DeleteInput) (*slack.Message, error) {
	var msgs []slack.Message
	var err error
	if in.ThreadTS != "" && in.ThreadTS != in.TS {
		msgs, _, _, err = d.cfg.Client.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: in.Channel, Timestamp: in.ThreadTS, Oldest: in.TS, Latest: in.TS, Inclusive: true, Limit: 2})
	} else {
		var h *slack.GetConversationHistoryResponse
		h, err = d.cfg.Client.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
			ChannelID: in.Channel, Oldest: in.TS, Latest: in.TS, Inclusive: true, Limit: 1})
		if h != nil {
			msgs = h.Messages
		}
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && (se.Err == "thread_not_found" || se.Err == "message_not_found") {
		return nil, errGone
	}
	if err != nil {
		return nil, err
	}
	for i := range msgs {
		if msgs[i].Timestamp == in.TS {
			return &msgs[i], nil
		}
	}
	return nil, errGone
}

// Recheck reports stale_state when the message was edited or deleted
// since the operation was prepared.
func (d *Delete) Recheck(ctx context.Context, op *approval.Operation) error {
	if op.State == nil {
		return nil
	}
	var in DeleteInput
	if err := json.Unmarshal(op.Input, &in); err != nil {
		return &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "stored input is unreadable"}
	}
	msg, err := d.read(ctx, in)
	if errors.Is(err, errGone) {
		return &approval.ExecError{Code: approval.CodeStaleState, Message: "the message is already gone; nothing was deleted"}
	}
	if err != nil {
		return err
	}
	hash, err := approval.StateHash(snapshotOf(msg))
	if err != nil {
		return err
	}
	if hash != op.State.Hash {
		return &approval.ExecError{Code: approval.CodeStaleState, Message: "the message changed since the deletion was approved; nothing was deleted"}
	}
	return nil
}

// Execute re-reads the message (when it was read at prepare) and deletes
// it with chat.delete.
func (d *Delete) Execute(ctx context.Context, op *approval.Operation) (json.RawMessage, error) {
	var in DeleteInput
	if err := json.Unmarshal(op.Input, &in); err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "stored input is unreadable"}
	}
	if err := d.Recheck(ctx, op); err != nil {
		var ee *approval.ExecError
		if errors.As(err, &ee) {
			return nil, ee
		}
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed,
			Message: "could not re-read the message before deleting it (" + errText(err) + "); nothing was deleted"}
	}
	// Slack keeps nothing of a deleted message to carry a receipt: it is
	// minted for the operation's result and audit.
	if _, err := approval.CountersignerFrom(ctx).Mint(approval.ReceiptRequest{Audience: ReceiptAudience}); err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "could not sign the receipt; nothing was deleted"}
	}
	err := retryRateLimited(ctx, d.cfg.Sleep, func() error {
		_, _, err := d.cfg.Client.DeleteMessageContext(ctx, in.Channel, in.TS)
		return err
	})
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "message_not_found" {
		return nil, &approval.ExecError{Code: approval.CodeStaleState, Message: "the message is already gone; nothing was deleted"}
	}
	if err != nil {
		return nil, execError("delete the message", op.Key, err)
	}
	return json.Marshal(map[string]any{"channel": in.Channel, "ts": in.TS, "deleted": true})
}

func errText(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		if h := hints[se.Err]; h != "" {
			return se.Err + ": " + h
		}
		return se.Err
	}
	return strings.TrimPrefix(safeErr(err), "the request ")
}
