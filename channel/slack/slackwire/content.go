package slackwire

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/safetext"
	"github.com/slack-go/slack"
)

// Slack's limits (https://docs.slack.dev/reference/block-kit/blocks).
const (
	MaxMessageBlocks = 50
	MaxModalBlocks   = 100
	MaxSectionText   = 3000
	MaxHeader        = 150
	// chunk is the plain text per section, under MaxSectionText.
	chunk = 2900
	// MaxModalChars bounds the agent text a modal is asked to hold:
	// Slack documents no total for a view, and a longer one is not read
	// on a phone anyway; past it the approver gets a personal link.
	MaxModalChars = 24000
)

// Content is the agent's part of an approval message as Block Kit
// blocks: a caption, then title, summary, fields and diff, each value in
// plain_text (which Slack never reads as mentions, links or formatting)
// and fenced line by line (safetext.Fence), so that no agent text can
// pass for the app's own words.
type Content struct {
	Blocks []slack.Block
	// Chars counts the agent text in the blocks.
	Chars int
	// Whole is false when Slack cannot show the operation as its
	// recipient gets it (an HTML email part), whatever the room.
	Whole bool
}

// BuildContent lays out m's agent content.
func BuildContent(m approval.Message) Content {
	c := Content{Whole: true}
	c.Blocks = append(c.Blocks, slack.NewContextBlock("", Mrkdwn(
		":speech_balloon: *From the agent*, shown exactly: lines start with │, ┆ where a long line continues; ⟨U+…⟩ marks a hidden character")))
	head := m.Title
	if m.Summary != "" {
		head += "\n" + m.Summary
	}
	c.add(head)
	for _, f := range m.OwnFields() {
		// Slack cannot lay out HTML: it shows what the recipient reads
		// and sends the approver to the page.
		label, size, value, laidOut := f.AsText()
		c.Whole = c.Whole && laidOut
		c.Blocks = append(c.Blocks, Section(Mrkdwn("*"+Escape(Truncate(label, 200))+"*"+Escape(size))))
		c.add(value)
	}
	if diff := m.OwnDiff(); len(diff) > 0 {
		c.Blocks = append(c.Blocks, Section(Mrkdwn("*Changes*")))
		for _, d := range diff {
			c.add(change(d))
		}
	}
	if items := m.Items(); len(items) > 0 {
		// A bulk: every item with its diff, packed into as few sections as
		// fit (a message holds 50 blocks); what does not fit gets Review.
		c.Blocks = append(c.Blocks, Section(Mrkdwn(fmt.Sprintf("*The %d requests, in the order they are written*", len(items)))))
		var b strings.Builder
		for i, it := range items {
			if i > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(it.Head.Label + ": " + it.Head.Value)
			for _, f := range it.Fields {
				if f.HTML != nil {
					c.Whole = false
				}
				b.WriteString("\n" + f.Label + ":\n" + f.Value)
			}
			for _, d := range it.Diff {
				b.WriteString("\n" + change(d))
			}
		}
		c.add(b.String())
	}
	return c
}

func change(d approval.ShownChange) string {
	return d.Field + "\n  before: " + side(d.Before, d.BeforeAbsent) + "\n  after:  " + side(d.After, d.AfterAbsent)
}

func side(s string, absent bool) string {
	if absent {
		return "(absent)"
	}
	return s
}

// add appends fenced plain_text sections holding s.
func (c *Content) add(s string) {
	for _, part := range FencedChunks(s) {
		c.Chars += utf8.RuneCountInString(part)
		c.Blocks = append(c.Blocks, Section(Plain(part)))
	}
}

// FencedChunks fences s line by line and packs the lines into pieces that
// fit a section; every piece starts with a fence.
func FencedChunks(s string) []string {
	var out []string
	var cur strings.Builder
	n := 0
	for _, line := range safetext.FenceLines(s, chunk-100) {
		l := utf8.RuneCountInString(line) + 1
		if n > 0 && n+l > chunk {
			out = append(out, cur.String())
			cur.Reset()
			n = 0
		}
		if n > 0 {
			cur.WriteByte('\n')
		}
		cur.WriteString(line)
		n += l
	}
	return append(out, cur.String())
}

// Escape makes text safe inside mrkdwn: Slack's control characters &, <
// and > are escaped, so nothing becomes a mention, link or command.
func Escape(s string) string { return mrkdwnEscaper.Replace(s) }

var mrkdwnEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Truncate cuts s to n runes, marking the cut with "…".
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func Plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

func Mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, true)
}

func Section(t *slack.TextBlockObject) *slack.SectionBlock {
	return slack.NewSectionBlock(t, nil, nil)
}

// BlockChars is the size of a block as sent.
func BlockChars(b slack.Block) int {
	raw, _ := json.Marshal(b)
	return len(raw)
}
