package slack

import (
	"encoding/json"
	"fmt"
	"github.com/countersign/countersign/channel/slack/slackwire"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	slackgo "github.com/slack-go/slack"
)

// The contract between an approval message and the click handler
// (package slackapp, which defines the same values): the buttons' action
// ids and the JSON each button's value carries.
const (
	ActionApprove = slackwire.ActionApprove
	ActionReject  = slackwire.ActionReject
	// BlockIDPrefix starts the block_id of the buttons' actions block; the
	// operation key follows.
	BlockIDPrefix = "countersign:"
	// EventType is the metadata event type of approval messages; the
	// payload holds operation_key, job and payload_hash.
	EventType = "countersign_approval"
)

// ButtonValue is the value of both buttons: the operation and the payload
// hash the human was shown. A click whose hash does not match the
// operation's is refused.
type ButtonValue = slackwire.ButtonValue

// Slack's limits (https://docs.slack.dev/reference/block-kit/blocks).
const (
	maxBlocks      = slackwire.MaxMessageBlocks
	maxHeader      = slackwire.MaxHeader
	maxSectionText = slackwire.MaxSectionText
	maxFallback    = 3000 // the notification text; Slack allows more, clients show less
)

// ActionReview is the button that replaces Approve when the message cannot
// show the operation whole.
const ActionReview = slackwire.ActionReview

// ActionRevoke is the button of an allowance in force.
const ActionRevoke = slackwire.ActionRevoke

// ActionEdit opens the edit modal (routes with allow_edit).
const ActionEdit = slackwire.ActionEdit

// Render builds an approval message for Slack from the channel-neutral
// message: the fallback text (notifications, screen readers) and the
// blocks. While the operation is pending the message carries decision
// buttons; once it has moved on it shows the outcome, who decided and
// when, and no buttons.
//
// Everything the action or the agent wrote (title, summary, field values,
// diff) is shown in plain_text and fenced line by line (slackwire.Content),
// warnings in escaped mrkdwn: it is shown exactly and cannot mention
// people, ping a channel or disguise a link. A message that cannot show
// the operation whole (Slack's limits, or an HTML part that Slack cannot
// lay out) says so and offers no Approve: its Review button brings the
// whole operation to the clicking approver alone.
func Render(m approval.Message) (string, []slackgo.Block) {
	text, blocks, _ := RenderWhole(m)
	return text, blocks
}

// RenderWhole is Render, and whether the blocks show the operation whole.
func RenderWhole(m approval.Message) (string, []slackgo.Block, bool) {
	pending := m.Status == approval.StatusPending
	var head, tail []slackgo.Block

	head = append(head, slackgo.NewHeaderBlock(plain(truncate(headerText(m), maxHeader))))
	head = append(head, section(mrkdwn(statusLine(m))))

	// Tail: warnings, who asked, decisions and the buttons, always shown.
	if len(m.Warnings) > 0 {
		// Plain text: warnings quote agent text (addresses, hosts, words),
		// which mrkdwn would format ("*ceo*@client.example" in bold, as
		// another address).
		var b strings.Builder
		b.WriteString(":warning: Warnings")
		for _, w := range m.Warnings {
			b.WriteString("\n• " + w)
		}
		tail = append(tail, section(slackgo.NewTextBlockObject(slackgo.PlainTextType, truncate(b.String(), maxSectionText), true, false)))
	}
	who := "Requested by *" + escape(m.Requester) + "*"
	if m.OnBehalfOf != "" {
		who += " on behalf of *" + escape(m.OnBehalfOf) + "*"
	}
	tail = append(tail, slackgo.NewContextBlock("",
		mrkdwn(who),
		mrkdwn("Fingerprint `"+escape(m.ShortHash())+"`"),
		mrkdwn(expiryLine(m)),
		mrkdwn("`"+escape(m.OperationKey)+"` · "+escape(m.Action)),
	))
	if d := decisionsLine(m); d != "" {
		tail = append(tail, slackgo.NewContextBlock("", mrkdwn(truncate(d, maxSectionText))))
	}

	// Middle: the exact preview, if it fits.
	content := slackwire.BuildContent(m)
	body := content.Blocks
	whole := content.Whole
	room := maxBlocks - len(head) - len(tail) - 1 // the buttons
	if cut := fitting(body, room-1, maxMessageChars); cut < len(body) {
		whole = false
		shown, hidden := 0, 0
		for i, b := range body {
			if i < cut {
				shown += blockChars(b)
			} else {
				hidden += blockChars(b)
			}
		}
		body = append(body[:cut:cut], section(mrkdwn(fmt.Sprintf(
			":warning: *Too long for one Slack message: about %d of %d characters are not shown here.* "+
				"So this message offers no Approve. Press *Review* to read all of it and decide.", hidden, shown+hidden))))
	} else if !whole {
		body = append(body, section(mrkdwn(":warning: *Slack cannot show this request as its recipient will see it* (it has an HTML part). "+
			"So this message offers no Approve. Press *Review* to see it whole and decide.")))
	}
	if pending && m.StepUp != "" {
		// A click in Slack is no proof of the person: the passkey is asked
		// for on the page, which Review opens (SPEC §11).
		whole = false
		tail = append(tail, section(mrkdwn(":closed_lock_with_key: *This request needs a passkey.* Slack cannot decide it: "+
			"press *Review* for your personal approval page, and decide there with your passkey.")))
	}
	if pending {
		tail = append(tail, buttons(m, whole))
	} else if m.Revocable {
		tail = append(tail, revokeButton(m))
	}
	blocks := append(append(head, body...), tail...)
	return fallback(m), blocks, whole
}

// maxMessageChars bounds the agent text of one message: past it a channel
// message is a wall nobody reads; the approver reviews it whole instead.
const maxMessageChars = 12000

// fitting is how many of blocks fit in n blocks and chars characters; all
// of them when they fit whole.
func fitting(blocks []slackgo.Block, n, chars int) int {
	total := 0
	for _, b := range blocks {
		total += blockChars(b)
	}
	if len(blocks) <= n+1 && total <= chars {
		return len(blocks)
	}
	used := 0
	for i, b := range blocks {
		used += blockChars(b)
		if i >= n || used > chars {
			return i
		}
	}
	return len(blocks)
}

func headerText(m approval.Message) string {
	label := "Approval needed"
	if m.Status != approval.StatusPending {
		label = statusLabel(m.Status)
	}
	return label + ": " + m.Action
}

// fallback is the message's text: shown in notifications and where
// blocks cannot be.
func fallback(m approval.Message) string {
	title := m.Title
	if title == "" {
		title = m.Action
	}
	var s string
	if m.Status == approval.StatusPending {
		s = "Approval needed: " + title + " (" + m.ShortHash() + ")"
	} else {
		s = title + ": " + m.Outcome
	}
	return truncate(escape(s), maxFallback)
}

func statusLabel(st approval.Status) string {
	_, label := status(st)
	return label
}

func statusLine(m approval.Message) string {
	icon, label := status(m.Status)
	return truncate(icon+" *"+label+"* — "+escape(m.Outcome), maxSectionText)
}

func status(st approval.Status) (icon, label string) {
	switch st {
	case approval.StatusPending:
		icon, label = ":hourglass_flowing_sand:", "Approval needed"
	case approval.StatusApproved:
		icon, label = ":large_green_circle:", "Approved"
	case approval.StatusExecuting:
		icon, label = ":gear:", "Running"
	case approval.StatusSucceeded:
		icon, label = ":white_check_mark:", "Done"
	case approval.StatusFailed:
		icon, label = ":x:", "Failed"
	case approval.StatusRejected:
		icon, label = ":no_entry:", "Rejected"
	case approval.StatusExpired:
		icon, label = ":alarm_clock:", "Expired"
	case approval.StatusCanceled:
		icon, label = ":heavy_multiplication_x:", "Canceled"
	case approval.StatusSuperseded:
		icon, label = ":pencil2:", "Replaced by an edited version"
	default:
		icon, label = ":grey_question:", string(st)
	}
	return icon, label
}

func expiryLine(m approval.Message) string {
	if m.ExpiresAt.IsZero() {
		return "No expiry"
	}
	verb := "Expires"
	if m.Status != approval.StatusPending {
		verb = "Approval window ends"
	}
	return verb + " " + SlackDate(m.ExpiresAt)
}

// SlackDate formats t with Slack date formatting, in the reader's own
// time zone, with a UTC fallback for clients that cannot.
func SlackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|%s>", t.Unix(), t.UTC().Format("Jan 2, 2006 15:04 UTC"))
}

func decisionsLine(m approval.Message) string {
	var parts []string
	for _, a := range m.Approvals {
		parts = append(parts, fmt.Sprintf(":white_check_mark: Approved by *%s* via %s, %s",
			escape(a.Name), escape(a.Via), SlackDate(a.At)))
	}
	if r := m.Rejection; r != nil {
		s := fmt.Sprintf(":no_entry: Rejected by *%s* via %s, %s", escape(r.Name), escape(r.Via), SlackDate(r.At))
		if r.Reason != "" {
			s += ": “" + escape(r.Reason) + "”"
		}
		parts = append(parts, s)
	}
	if m.Status == approval.StatusPending && len(m.Approvals) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d approvals", len(m.Approvals), m.Required))
	}
	return strings.Join(parts, "\n")
}

func buttons(m approval.Message, whole bool) slackgo.Block {
	v, _ := json.Marshal(ButtonValue{Operation: m.OperationKey, PayloadHash: m.PayloadHash})
	reject := slackgo.NewButtonBlockElement(ActionReject, string(v), plain("Reject"))
	reject.Style = slackgo.StyleDanger
	if m.StepUp != "" {
		review := slackgo.NewButtonBlockElement(ActionReview, string(v), plain("Review"))
		review.Style = slackgo.StylePrimary
		return slackgo.NewActionBlock(BlockIDPrefix+m.OperationKey, review)
	}
	var edit []slackgo.BlockElement
	if m.Editable {
		edit = append(edit, slackgo.NewButtonBlockElement(ActionEdit, string(v), plain("Edit")))
	}
	if !whole {
		review := slackgo.NewButtonBlockElement(ActionReview, string(v), plain("Review"))
		review.Style = slackgo.StylePrimary
		return slackgo.NewActionBlock(BlockIDPrefix+m.OperationKey, append([]slackgo.BlockElement{review, reject}, edit...)...)
	}
	approve := slackgo.NewButtonBlockElement(ActionApprove, string(v), plain("Approve"))
	approve.Style = slackgo.StylePrimary
	approve.Confirm = slackgo.NewConfirmationBlockObject(
		plain("Approve this operation?"),
		mrkdwn(truncate("countersign will carry out this "+escape(m.Action)+" exactly as shown (fingerprint `"+
			escape(m.ShortHash())+"`), once.", 300)),
		plain("Approve"), plain("Cancel"))
	return slackgo.NewActionBlock(BlockIDPrefix+m.OperationKey, append([]slackgo.BlockElement{approve, reject}, edit...)...)
}

// revokeButton ends an allowance in force; its approvers may press it
// (channel/slack/slackapp checks who), after a confirmation.
func revokeButton(m approval.Message) slackgo.Block {
	v, _ := json.Marshal(ButtonValue{Operation: m.OperationKey, PayloadHash: m.PayloadHash})
	revoke := slackgo.NewButtonBlockElement(ActionRevoke, string(v), plain("Revoke the allowance"))
	revoke.Style = slackgo.StyleDanger
	revoke.Confirm = slackgo.NewConfirmationBlockObject(plain("Revoke this allowance?"),
		plain("It approves nothing more; the agent's next operations go to people again."),
		plain("Revoke"), plain("Cancel"))
	return slackgo.NewActionBlock(BlockIDPrefix+m.OperationKey, revoke)
}

func truncate(s string, n int) string { return slackwire.Truncate(s, n) }

func escape(s string) string { return slackwire.Escape(s) }

func plain(s string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.PlainTextType, s, false, false)
}

func mrkdwn(s string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.MarkdownType, s, false, true)
}

func section(t *slackgo.TextBlockObject) *slackgo.SectionBlock {
	return slackgo.NewSectionBlock(t, nil, nil)
}

func blockChars(b slackgo.Block) int {
	raw, _ := json.Marshal(b)
	return len(raw)
}
