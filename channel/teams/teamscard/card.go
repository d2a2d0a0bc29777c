package teamscard

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/safetext"
)

// Teams' limits: a bot's message must stay under about 28 KB, activity
// included; past MaxAgentChars of agent text a chat message is a wall
// nobody reads (Slack's bound too), and the approver reviews it whole on
// the approval page instead.
const (
	MaxCardBytes  = 24000
	MaxAgentChars = 12000
	// lineWidth wraps very long lines of agent text; continuations start
	// with safetext.FenceWrap.
	lineWidth = 200
)

// Note is a line on top of a card that only the clicking user sees (the
// invoke response): what their click did, or why it did nothing.
type Note struct {
	Text string
	// Style is the Container style: "good", "attention" or "warning".
	Style string
	// Link, when set, is an Action.OpenUrl: a personal approval page (a
	// capability for that user: never log it).
	Link, LinkTitle string
}

// Render builds an approval card from the channel-neutral message, with
// note on top when it answers one user's click. While the operation is
// pending the card carries decision buttons; once it has moved on it
// shows the outcome, who decided and when, and none. whole is false when
// the card cannot show the operation whole (Teams' size, or an HTML part
// it cannot lay out): it then says so, and offers Review instead of
// Approve.
//
// Everything the action, the agent or an approver wrote is a TextRun
// (plain text), and the agent's content is fenced line by line (│) in a
// shaded container, under countersign's own caption.
func Render(m approval.Message, note *Note) (card *Card, whole bool) {
	var head, tail []Element
	if note != nil {
		head = append(head, Element{Type: "Container", Style: note.Style, Items: []Element{Rich(Run(note.Text))}})
	}
	head = append(head, Rich(Inline{Type: "TextRun", Text: headerText(m), Weight: "Bolder", Size: "Medium"}))
	icon, label := status(m.Status)
	head = append(head, Rich(Bold(icon+" "+label), Run(" — "+m.Outcome)))

	if len(m.Warnings) > 0 {
		w := Element{Type: "Container", Style: "warning", Items: []Element{Rich(Bold("⚠️ Warnings"))}}
		for _, s := range m.Warnings {
			w.Items = append(w.Items, spaced(Rich(Run("• "+s))))
		}
		tail = append(tail, w)
	}
	who := []Inline{Run("Requested by "), Bold(m.Requester)}
	if m.OnBehalfOf != "" {
		who = append(who, Run(" on behalf of "), Bold(m.OnBehalfOf))
	}
	tail = append(tail, Rich(who...),
		Rich(Run("Fingerprint "), Mono(m.ShortHash()), Run(" · "), Mono(m.OperationKey), Run(" · "+m.Action)),
		Subtle(expiryLine(m)))
	tail = append(tail, decisions(m)...)

	c := buildContent(m)
	whole = c.whole
	actions := buttons(m, true, note)
	frame := &Card{Type: "AdaptiveCard", Schema: Schema, Version: Version, Body: append(append(head, tail...), noticeSizer), Actions: actions}
	room := MaxCardBytes - frame.Size()
	pieces := c.pieces
	if cut, shown, total := fit(pieces, room, MaxAgentChars); cut < len(pieces) {
		whole = false
		pieces = pieces[:cut]
		pieces = append(pieces, notice(fmt.Sprintf("**Too long for one Teams message: about %d of %d characters are not shown here.** "+
			"So this message offers no Approve. Press **Review** to read all of it and decide.", total-shown, total)))
	} else if !whole {
		pieces = append(pieces, notice("**Teams cannot show this request as its recipient will see it** (it has an HTML part). "+
			"So this message offers no Approve. Press **Review** to see it whole and decide."))
	}
	if m.Status == approval.StatusPending && m.StepUp != "" {
		// A click in Teams is no proof of the person: the passkey is asked
		// for on the page, which Review opens (SPEC §11).
		whole = false
		tail = append(tail, notice("**This request needs a passkey.** Teams cannot decide it: "+
			"press **Review** for your personal approval page, and decide there with your passkey."))
	}
	content := Element{Type: "Container", Style: "emphasis", Items: pieces}
	body := append(append(head, Subtle("💬 **From the agent**, shown exactly: lines start with │, ┆ where a long line continues; ⟨U+…⟩ marks a hidden character"), content), tail...)
	card = &Card{Type: "AdaptiveCard", Schema: Schema, Version: Version, Body: body,
		Actions: buttons(m, whole, note), MSTeams: &MSTeams{Width: "Full"}}
	return card, whole
}

// noticeSizer stands for the too-long notice when measuring the frame.
var noticeSizer = notice(strings.Repeat("x", 260))

func notice(s string) Element {
	return Element{Type: "TextBlock", Text: "⚠️ " + s, Wrap: true, Color: "Warning", Spacing: "Medium"}
}

func spaced(e Element) Element { e.Spacing = "None"; return e }

// content is the agent's part of a card, and whether it is all of it as
// the recipient will see it.
type content struct {
	pieces []Element
	whole  bool
}

// buildContent lays out m's agent content: title and summary, fields,
// diff, each line a TextRun starting with the fence.
func buildContent(m approval.Message) content {
	c := content{whole: true}
	head := m.Title
	if m.Summary != "" {
		head += "\n" + m.Summary
	}
	c.lines(head)
	for _, f := range m.Fields {
		// Teams cannot lay out an email's HTML: it shows what the
		// recipient reads and sends the approver to the page.
		label, size, value, laidOut := f.AsText()
		c.whole = c.whole && laidOut
		c.pieces = append(c.pieces, Element{Type: "RichTextBlock", Spacing: "Medium", Inlines: []Inline{Bold(truncate(label, 200)), Run(size)}})
		c.lines(value)
	}
	if len(m.Diff) > 0 {
		c.pieces = append(c.pieces, Element{Type: "RichTextBlock", Spacing: "Medium", Inlines: []Inline{Bold("Changes")}})
		for _, d := range m.Diff {
			c.lines(d.Field + "\n  before: " + side(d.Before, d.BeforeAbsent) + "\n  after:  " + side(d.After, d.AfterAbsent))
		}
	}
	return c
}

// lines adds s fenced, one RichTextBlock per line: a TextRun's line
// breaks are not shown alike by every Teams client.
func (c *content) lines(s string) {
	for _, line := range safetext.FenceLines(s, lineWidth) {
		c.pieces = append(c.pieces, spaced(Rich(Run(line))))
	}
}

// fit is how many pieces fit in room bytes and chars characters of text,
// and the characters shown and in all.
func fit(pieces []Element, room, chars int) (cut, shown, total int) {
	counts := make([]int, len(pieces))
	for i, p := range pieces {
		for _, in := range p.Inlines {
			counts[i] += utf8.RuneCountInString(in.Text)
		}
		total += counts[i]
	}
	used := 0
	for i, p := range pieces {
		used += (&Card{Body: []Element{p}}).Size() - len(`{"type":"","body":[]}`) + 1
		if used > room || shown+counts[i] > chars {
			return i, shown, total
		}
		shown += counts[i]
	}
	return len(pieces), shown, total
}

func side(s string, absent bool) string {
	if absent {
		return "(absent)"
	}
	return s
}

func headerText(m approval.Message) string {
	label := "Approval needed"
	if m.Status != approval.StatusPending {
		_, label = status(m.Status)
	}
	return label + ": " + m.Action
}

func status(st approval.Status) (icon, label string) {
	switch st {
	case approval.StatusPending:
		return "⏳", "Approval needed"
	case approval.StatusApproved:
		return "🟢", "Approved"
	case approval.StatusExecuting:
		return "⚙️", "Running"
	case approval.StatusSucceeded:
		return "✅", "Done"
	case approval.StatusFailed:
		return "❌", "Failed"
	case approval.StatusRejected:
		return "⛔", "Rejected"
	case approval.StatusExpired:
		return "⏰", "Expired"
	case approval.StatusCanceled:
		return "✖️", "Canceled"
	}
	return "❔", string(st)
}

// expiryLine is own words with Adaptive Card date functions, which Teams
// shows in the reader's own time zone.
func expiryLine(m approval.Message) string {
	if m.ExpiresAt.IsZero() {
		return "No expiry"
	}
	verb := "Expires"
	if m.Status != approval.StatusPending {
		verb = "Approval window ends"
	}
	t := m.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z")
	return verb + " {{DATE(" + t + ", SHORT)}} at {{TIME(" + t + ")}}"
}

// Date is how a card writes a time inside plain text: UTC.
func Date(t time.Time) string { return t.UTC().Format("Jan 2, 2006 15:04 UTC") }

func decisions(m approval.Message) []Element {
	var out []Element
	for _, a := range m.Approvals {
		out = append(out, spaced(Rich(Run("✅ Approved by "), Bold(a.Name), Run(" via "+a.Via+", "+Date(a.At)))))
	}
	if r := m.Rejection; r != nil {
		runs := []Inline{Run("⛔ Rejected by "), Bold(r.Name), Run(" via " + r.Via + ", " + Date(r.At))}
		if r.Reason != "" {
			runs = append(runs, Run(": “"+r.Reason+"”"))
		}
		out = append(out, spaced(Rich(runs...)))
	}
	if m.Status == approval.StatusPending && len(m.Approvals) > 0 {
		out = append(out, spaced(Rich(Run(fmt.Sprintf("%d of %d approvals", len(m.Approvals), m.Required)))))
	}
	return out
}

// buttons are the card's actions: while pending, Approve (behind a
// confirmation) or Review, and Reject (asking why); a note's link first.
func buttons(m approval.Message, whole bool, note *Note) []Action {
	var out []Action
	if note != nil && note.Link != "" {
		out = append(out, Action{Type: "Action.OpenUrl", Title: note.LinkTitle, URL: note.Link, Style: "positive"})
	}
	if m.Status != approval.StatusPending {
		return out
	}
	d := Data{Operation: m.OperationKey, PayloadHash: m.PayloadHash}
	if m.StepUp != "" {
		return append(out, Execute(VerbReview, "Review", "positive", d))
	}
	if whole {
		confirm := &Card{Type: "AdaptiveCard", Body: []Element{Own("**Approve this operation?** countersign will carry out this " +
			m.Action + " exactly as shown (fingerprint " + m.ShortHash() + "), once.")},
			Actions: []Action{Execute(VerbApprove, "Approve", "positive", d)}}
		out = append(out, Action{Type: "Action.ShowCard", Title: "Approve", Style: "positive", Card: confirm})
	} else {
		out = append(out, Execute(VerbReview, "Review", "positive", d))
	}
	ask := &Card{Type: "AdaptiveCard", Body: []Element{{
		Type: "Input.Text", ID: ReasonInput, Label: "Why are you rejecting it?", IsMultiline: true, IsRequired: true,
		Placeholder:  "What should change, or why not at all? The agent that asked sees this reason.",
		ErrorMessage: "Please say why, so the requester can act on it.", MaxLength: MaxReason,
	}}, Actions: []Action{Execute(VerbReject, "Reject", "destructive", d)}}
	return append(out, Action{Type: "Action.ShowCard", Title: "Reject", Style: "destructive", Card: ask})
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// NoteCard is a card holding only a note, for a click on an operation
// that cannot be shown.
func NoteCard(n Note) *Card {
	return &Card{Type: "AdaptiveCard", Schema: Schema, Version: Version,
		Body: []Element{{Type: "Container", Style: n.Style, Items: []Element{Rich(Run(n.Text))}}}}
}
