package approval

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/approval/htmlview"
	"github.com/countersign/countersign/approval/safetext"
)

// ShownField is one field of a preview as humans see it: the label and
// value escaped (safetext), with the size of the value as the action gave
// it, and for an HTML body its rendering.
type ShownField struct {
	Name   string
	Label  string
	Value  string
	Long   bool
	Format string
	// Bytes, Chars and Lines measure the value as prepared (before escapes).
	Bytes, Chars, Lines int
	// HTML is the rendering of an HTML body (Format "html").
	HTML *HTMLPart
	// Item is the bulk item the field belongs to (from 1), 0 for the
	// operation's own fields.
	Item int
	// Technical: the exact protocol detail behind words shown elsewhere
	// (Field.Technical).
	Technical bool
}

// Size says how long a value is, in words people use: "3 lines, 120 characters".
func (f ShownField) Size() string {
	lines := "1 line"
	if f.Lines != 1 {
		lines = fmt.Sprintf("%d lines", f.Lines)
	}
	chars := "1 character"
	if f.Chars != 1 {
		chars = fmt.Sprintf("%d characters", f.Chars)
	}
	return lines + ", " + chars
}

// AsText is the field for a channel that lays out plain text only (chat
// cards): its label, with the size of a long value, and its value. An HTML
// body becomes what the recipient reads and where its links go, and
// laidOut is false: the approver must be sent to the page to see it whole.
func (f ShownField) AsText() (label, size, value string, laidOut bool) {
	label = cmp.Or(f.Label, f.Name)
	if f.Long {
		size = " (" + f.Size() + ")"
	}
	if f.HTML == nil {
		return label, size, f.Value, true
	}
	value = f.HTML.Text
	for _, l := range f.HTML.Links {
		value += fmt.Sprintf("\n[%d] %s → %s", l.N, l.Text, l.Href)
	}
	return label + ", as the recipient will read it", size, value, false
}

// HTMLPart is an HTML body as its recipient will see it (package
// htmlview), with every string escaped.
type HTMLPart struct {
	// Doc is the sanitized document for a sandboxed frame (no scripts,
	// styles, remote loads or live links). It is agent content.
	Doc string
	// Text is its visible text, with link and image markers ([1], [image 1]).
	Text string
	// Links are its link targets, as written, numbered like the markers.
	Links []htmlview.Link
	// Remote lists what the recipient's mail program may load from elsewhere.
	Remote []string
	// Hidden says styling hides some of it from the recipient;
	// HiddenText lists what (the first runs) and why.
	Hidden     bool
	HiddenText []htmlview.Hidden
	// Unshown is text some mail programs show that Doc does not.
	Unshown []string
	// Lines estimates the height of Doc at phone width, in lines.
	Lines int
	// Mismatch compares its words with the text part ("text" field).
	Mismatch htmlview.Mismatch
}

// ShownChange is one field of a diff as humans see it: each side as JSON
// text, escaped; an absent side is marked, never shown as a value.
type ShownChange struct {
	Field                     string
	Before, After             string
	BeforeAbsent, AfterAbsent bool
	// Item is the bulk item the change belongs to (from 1), or 0.
	Item int
}

// HiddenChar is one kind of hidden character found in the agent's text,
// and where.
type HiddenChar struct {
	Rune  rune
	Name  string // "U+202E RIGHT-TO-LEFT OVERRIDE"
	Where []string
}

// renderer escapes every string of a message and remembers what it found.
type renderer struct {
	hidden []HiddenChar
	markup []string
	// urls and mixed are look-alikes (safetext): hosts that are not what
	// they seem, and words mixing scripts.
	urls, mixed []string
}

func newRenderer() *renderer { return &renderer{} }

func (r *renderer) note(where string, found []rune) {
	for _, c := range found {
		i := 0
		for i < len(r.hidden) && r.hidden[i].Rune != c {
			i++
		}
		if i == len(r.hidden) {
			r.hidden = append(r.hidden, HiddenChar{Rune: c, Name: safetext.Describe(c)})
		}
		if !containsString(r.hidden[i].Where, where) {
			r.hidden[i].Where = append(r.hidden[i].Where, where)
		}
	}
}

func (r *renderer) escape(where, s string, multiline bool) string {
	out, found := safetext.Escape(s, multiline)
	r.note(where, found)
	for _, m := range safetext.SlackMarkup(out) {
		if len(r.markup) < 10 && !containsString(r.markup, m) {
			r.markup = append(r.markup, m)
		}
	}
	r.urls = addNotes(r.urls, safetext.DeceptiveURLs(out))
	r.mixed = addNotes(r.mixed, safetext.MixedScriptWords(out))
	return out
}

// addNotes adds the notes not in l yet, keeping at most 10.
func addNotes(l, notes []string) []string {
	for _, n := range notes {
		if len(l) < 10 && !containsString(l, n) {
			l = append(l, n)
		}
	}
	return l
}

func (r *renderer) line(where, s string) string  { return r.escape(where, s, false) }
func (r *renderer) block(where, s string) string { return r.escape(where, s, true) }

// preview escapes the action's preview into m.
func (r *renderer) preview(m *Message, p Preview) {
	m.Title = r.line("Title", p.Title)
	m.Summary = r.line("Summary", p.Summary)
	var text string
	for _, f := range p.Fields {
		if f.Name == "text" {
			text = f.Value
		}
	}
	for _, f := range p.Fields {
		label := r.line("Label", f.Label)
		where := label
		if where == "" {
			where = f.Name
		}
		sf := ShownField{Name: f.Name, Label: label, Long: f.Long, Format: f.Format, Item: f.Item, Technical: f.Technical,
			Bytes: len(f.Value), Chars: utf8.RuneCountInString(f.Value), Lines: lineCount(f.Value)}
		if f.Long {
			sf.Value = r.block(where, f.Value)
		} else {
			sf.Value = r.line(where, f.Value)
		}
		if f.Format == FormatHTML {
			sf.HTML = r.html(where, f.Value, text)
		}
		m.Fields = append(m.Fields, sf)
	}
	m.Diff = r.changes("Changes", p.Diff)
	for i, w := range p.Warnings {
		if words, ok := tokenWords[w]; ok {
			w = words
		}
		m.warn(p.Code(i), r.line("a warning", w))
	}
}

// tokenWords spell out, for people, the warnings actions give as bare
// tokens (their codes stay the tokens). "irreversible" stays itself:
// every channel shows it as its own badge.
var tokenWords = map[string]string{
	"not_state_bound": "Not checked against the record's current state before it runs.",
	"no_etag":         "A change made to the record in the very last instant before the write cannot be caught: the target does not say which version it holds.",
	"diff_truncated":  "The list of changes is cut short: the body is shown whole instead.",
}

// warn adds a warning with its stable code.
func (m *Message) warn(code, msg string) {
	m.Warnings = append(m.Warnings, msg)
	m.WarningCodes = append(m.WarningCodes, code)
}

// html renders an HTML body and compares it with the text part.
func (r *renderer) html(where, src, text string) *HTMLPart {
	v := htmlview.Render(src)
	h := &HTMLPart{Hidden: v.Hidden, Lines: v.Lines, Mismatch: htmlview.Compare(v, text)}
	// The document goes into a sandboxed frame; its text is escaped there
	// by the same rule, so a reversed or invisible run shows as an escape.
	h.Doc = safetext.Block(v.Doc)
	h.Text = r.block(where+" (as shown)", v.Text)
	for _, l := range v.Links {
		// The target is shown in its wire form: a host in other letters
		// than ASCII as the punycode it resolves as (and warned about).
		link := htmlview.Link{N: l.N, Text: r.line(where+" links", l.Text), Href: safetext.WireURL(r.line(where+" links", l.Href))}
		if note := safetext.LinkMismatch(link.Text, link.Href); note != "" {
			r.urls = addNotes(r.urls, []string{note})
		}
		h.Links = append(h.Links, link)
	}
	for _, u := range v.Remote {
		h.Remote = append(h.Remote, r.line(where+" remote content", u))
	}
	for _, x := range v.HiddenText {
		h.HiddenText = append(h.HiddenText, htmlview.Hidden{Text: r.line(where+" (hidden text)", x.Text), Why: x.Why})
	}
	for _, u := range v.Unshown {
		h.Unshown = append(h.Unshown, r.line(where+" (text shown elsewhere)", u))
	}
	for i, w := range h.Mismatch.OnlyHTML {
		h.Mismatch.OnlyHTML[i] = safetext.Line(w)
	}
	for i, w := range h.Mismatch.OnlyText {
		h.Mismatch.OnlyText[i] = safetext.Line(w)
	}
	return h
}

func (r *renderer) changes(where string, cs []Change) []ShownChange {
	var out []ShownChange
	for _, c := range cs {
		sc := ShownChange{Field: r.line(where, c.Field), BeforeAbsent: len(c.Before) == 0, AfterAbsent: len(c.After) == 0, Item: c.Item}
		if !sc.BeforeAbsent {
			sc.Before = r.block(where, string(c.Before))
		}
		if !sc.AfterAbsent {
			sc.After = r.block(where, string(c.After))
		}
		out = append(out, sc)
	}
	return out
}

// finish adds the renderer's warnings: what was escaped, what the HTML
// part does, and Slack markup.
func (r *renderer) finish(m *Message) {
	m.Hidden = r.hidden
	if len(r.hidden) > 0 {
		var parts []string
		for _, h := range r.hidden {
			parts = append(parts, h.Name+" in "+strings.Join(h.Where, ", "))
		}
		m.warn(WarnHiddenCharacters, "Hidden characters are shown as ⟨U+…⟩: they would be invisible, or change the "+
			"direction of the text around them, so that it reads differently from what it is. Found: "+strings.Join(parts, "; ")+".")
	}
	for _, f := range m.Fields {
		h := f.HTML
		if h == nil {
			continue
		}
		if mm := h.Mismatch; mm.Differs {
			s := "The HTML part (what most mail programs show) does not say what the text part says."
			if len(mm.OnlyHTML) > 0 {
				s += " Only in the HTML part: " + quoteWords(mm.OnlyHTML) + "."
			}
			if len(mm.OnlyText) > 0 {
				s += " Only in the text part: " + quoteWords(mm.OnlyText) + "."
			}
			m.warn(WarnHTMLDiffers, s)
		}
		if h.Hidden {
			s := "Part of the HTML part is hidden by its styling, so the recipient will not see it; it is shown here marked [hidden: …]."
			var parts []string
			for _, x := range h.HiddenText {
				if x.Text == "" {
					parts = append(parts, x.Why)
				} else {
					parts = append(parts, "“"+x.Text+"” ("+x.Why+")")
				}
			}
			if len(parts) > 0 {
				s += " Hidden: " + strings.Join(parts, "; ") + "."
			}
			m.warn(WarnHiddenHTMLText, s)
		}
		if len(h.Unshown) > 0 {
			m.warn(WarnUnshownHTMLText, "Some mail programs show text of the HTML part that is not shown here: "+strings.Join(h.Unshown, "; ")+".")
		}
		if n := len(h.Remote); n > 0 {
			m.warn(WarnRemoteContent, fmt.Sprintf("The HTML part loads %d remote resource%s (images, styles) that are not shown here "+
				"and may tell the sender when it is opened: %s.", n, plural(n), strings.Join(first(h.Remote, 3), ", ")))
		}
	}
	if len(r.urls) > 0 {
		m.warn(WarnLookalikeLink, "Links that lead somewhere other than they seem to: "+strings.Join(r.urls, "; ")+".")
	}
	if len(r.mixed) > 0 {
		m.warn(WarnMixedScript, "Words that mix letters of different scripts, so that they look like other words: "+
			strings.Join(r.mixed, ", ")+".")
	}
	if len(r.markup) > 0 {
		m.warn(WarnSlackMarkup, "Slack would read parts of this text as mentions, broadcasts, dates or links whose "+
			"label hides where they go: "+quoteWords(r.markup)+".")
	}
}

func quoteWords(ws []string) string {
	const show = 8
	q := make([]string, 0, show)
	for _, w := range first(ws, show) {
		q = append(q, "“"+w+"”")
	}
	s := strings.Join(q, ", ")
	if len(ws) > show {
		s += fmt.Sprintf(" and %d more", len(ws)-show)
	}
	return s
}

func first(l []string, n int) []string {
	if len(l) > n {
		return l[:n]
	}
	return l
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func lineCount(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// Guarantee 10 for what humans are shown: every hidden character is shown
// as an escape ("⟨U+007F⟩", 12 bytes for one), so an input made of them
// would be rendered many times over in every channel and every reminder
// (a 200 KB text of U+007F made a 3.4 MB page and a 3.9 MB approval
// email). The escapes of a preview may add at most the size of the
// request and maxEscapeSlack; past that the input is refused.
const maxEscapeSlack = 16 << 10

// checkEscapeGrowth refuses (invalid_input) a preview whose escapes would
// add more than request + maxEscapeSlack bytes.
func checkEscapeGrowth(p Preview, request int) error {
	limit := request + maxEscapeSlack
	growth, count := 0, 0
	var first []rune
	add := func(s string, multiline bool) {
		out, found := safetext.Escape(s, multiline)
		if d := len(out) - len(s); d > 0 {
			growth += d
			count += strings.Count(out, "⟨U+") - strings.Count(s, "⟨U+")
			for _, r := range found {
				if len(first) < 3 && !slices.Contains(first, r) {
					first = append(first, r)
				}
			}
		}
	}
	add(p.Title, false)
	add(p.Summary, false)
	for _, f := range p.Fields {
		if f.Bounded {
			continue
		}
		add(f.Label, false)
		add(f.Value, f.Long)
		if growth > limit {
			break
		}
	}
	for _, c := range p.Diff {
		add(c.Field, false)
		add(string(c.Before), true)
		add(string(c.After), true)
		if growth > limit {
			break
		}
	}
	for _, w := range p.Warnings {
		add(w, false)
	}
	if growth <= limit {
		return nil
	}
	var names []string
	for _, r := range first {
		names = append(names, safetext.Describe(r))
	}
	return FieldErrors{{Field: "input", Reason: fmt.Sprintf("holds at least %d invisible or control characters (%s): "+
		"each is shown to the approver as a visible escape such as ⟨U+200B⟩, and so many would make what they read "+
		"several times the size of the request; remove them", count, strings.Join(names, ", "))}}.Err()
}
