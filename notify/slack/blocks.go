package slack

import (
	"encoding/json"
	"fmt"
	"github.com/countersign/countersign/internal/slackwire"
	"strings"
	"time"
	"unicode/utf8"

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
	maxBlocks      = 50
	maxHeader      = 150
	maxSectionText = 3000
	maxFieldText   = 2000
	maxFields      = 10
	chunk          = 2900 // plain text per section, under maxSectionText
	maxFallback    = 3000 // the notification text; Slack allows more, clients show less
)

// Render builds an approval message for Slack from the channel-neutral
// message: the fallback text (notifications, screen readers) and the
// blocks. While the operation is pending the message carries the Approve
// and Reject buttons; once it has moved on it shows the outcome, who
// decided and when, and no buttons.
//
// Everything the action or the agent wrote (title, summary, field values,
// diff, warnings) is shown as plain text or escaped mrkdwn, so it is shown
// exactly and cannot mention people, ping a channel or disguise a link.
func Render(m approval.Message) (string, []slackgo.Block) {
	pending := m.Status == approval.StatusPending
	var head, tail []slackgo.Block

	title := m.Title
	if title == "" {
		title = m.Action
	}
	head = append(head, slackgo.NewHeaderBlock(plain(truncate(title, maxHeader))))
	head = append(head, section(mrkdwn(statusLine(m))))
	if m.Summary != "" {
		head = append(head, plainSections(m.Summary)...)
	}

	// Tail: warnings, who asked, decisions and the buttons, always shown.
	if len(m.Warnings) > 0 {
		var b strings.Builder
		b.WriteString(":warning: *Warnings*")
		for _, w := range m.Warnings {
			b.WriteString("\n• " + escape(w))
		}
		tail = append(tail, section(mrkdwn(truncate(b.String(), maxSectionText))))
	}
	who := "Requested by *" + escape(m.Requester) + "*"
	if m.OnBehalfOf != "" {
		who += " on behalf of *" + escape(m.OnBehalfOf) + "*"
	}
	tail = append(tail, slackgo.NewContextBlock("",
		mrkdwn(who),
		mrkdwn("Payload `"+escape(m.ShortHash())+"`"),
		mrkdwn(expiryLine(m)),
		mrkdwn("`"+escape(m.OperationKey)+"` · "+escape(m.Action)),
	))
	if d := decisionsLine(m); d != "" {
		tail = append(tail, slackgo.NewContextBlock("", mrkdwn(truncate(d, maxSectionText))))
	}
	if pending {
		tail = append(tail, buttons(m))
	}

	// Middle: the exact preview, as much as Slack allows.
	body := previewBlocks(m)
	room := maxBlocks - len(head) - len(tail)
	if len(body) > room {
		hidden := 0
		for _, b := range body[room-1:] {
			hidden += blockChars(b)
		}
		body = append(body[:room-1], section(mrkdwn(fmt.Sprintf(
			":warning: *The preview is too long for one Slack message: about %d more characters are not shown.* "+
				"Do not approve what you have not read; ask the requester for a shorter operation.", hidden))))
	}
	blocks := append(append(head, body...), tail...)
	return fallback(m), blocks
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

func statusLine(m approval.Message) string {
	var icon, label string
	switch m.Status {
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
	default:
		icon, label = ":grey_question:", string(m.Status)
	}
	return truncate(icon+" *"+label+"* — "+escape(m.Outcome), maxSectionText)
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

func buttons(m approval.Message) slackgo.Block {
	v, _ := json.Marshal(ButtonValue{Operation: m.OperationKey, PayloadHash: m.PayloadHash})
	approve := slackgo.NewButtonBlockElement(ActionApprove, string(v), plain("Approve"))
	approve.Style = slackgo.StylePrimary
	title := m.Title
	if title == "" {
		title = m.Action
	}
	approve.Confirm = slackgo.NewConfirmationBlockObject(
		plain("Approve this operation?"),
		mrkdwn(truncate("countersign will carry out *"+escape(truncate(title, 120))+"* exactly as shown (payload `"+
			escape(m.ShortHash())+"`), once.", 300)),
		plain("Approve"), plain("Cancel"))
	reject := slackgo.NewButtonBlockElement(ActionReject, string(v), plain("Reject"))
	reject.Style = slackgo.StyleDanger
	return slackgo.NewActionBlock(BlockIDPrefix+m.OperationKey, approve, reject)
}

// previewBlocks shows the fields and the diff exactly: labels in bold,
// values as plain text.
func previewBlocks(m approval.Message) []slackgo.Block {
	var out []slackgo.Block
	var pairs []*slackgo.TextBlockObject
	flush := func() {
		if len(pairs) > 0 {
			out = append(out, slackgo.NewSectionBlock(nil, pairs, nil))
			pairs = nil
		}
	}
	for _, f := range m.Fields {
		label := f.Label
		if label == "" {
			label = f.Name
		}
		if !f.Long && f.Value != "" && utf8.RuneCountInString(f.Value) <= maxFieldText && !strings.Contains(f.Value, "\n") {
			pairs = append(pairs, mrkdwn("*"+escape(truncate(label, 200))+"*"), plain(f.Value))
			if len(pairs) == maxFields {
				flush()
			}
			continue
		}
		flush()
		out = append(out, section(mrkdwn("*"+escape(truncate(label, 200))+"*")))
		if f.Value == "" {
			out = append(out, section(mrkdwn("_(empty)_")))
			continue
		}
		out = append(out, plainSections(f.Value)...)
	}
	flush()
	if len(m.Diff) > 0 {
		out = append(out, section(mrkdwn("*Changes*")))
		for _, c := range m.Diff {
			text := c.Field + "\n  before: " + jsonText(c.Before) + "\n  after:  " + jsonText(c.After)
			out = append(out, plainSections(text)...)
		}
	}
	return out
}

// jsonText shows a diff value: strings as themselves, other JSON as
// written, absent as "(absent)".
func jsonText(v json.RawMessage) string {
	if len(v) == 0 || string(v) == "null" {
		return "(absent)"
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

func plainSections(s string) []slackgo.Block {
	var out []slackgo.Block
	for _, part := range chunks(s, chunk) {
		out = append(out, section(plain(part)))
	}
	return out
}

// chunks splits s into pieces of at most n runes, at a line break where
// one is near.
func chunks(s string, n int) []string {
	var out []string
	for utf8.RuneCountInString(s) > n {
		cut := byteIndexOfRune(s, n)
		if nl := strings.LastIndexByte(s[:cut], '\n'); nl > cut/2 {
			cut = nl + 1
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func byteIndexOfRune(s string, n int) int {
	i := 0
	for j := range s {
		if i == n {
			return j
		}
		i++
	}
	return len(s)
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return s[:byteIndexOfRune(s, n-1)] + "…"
}

// escape makes text safe inside mrkdwn: Slack's control characters &, <
// and > are escaped, so nothing becomes a mention, link or command.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

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
