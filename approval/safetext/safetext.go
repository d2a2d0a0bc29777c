// Package safetext renders agent-chosen strings for humans so that what a
// person reads is what the string holds: characters that show as nothing,
// change the direction of the text around them, or break a line where the
// reader expects none are replaced by visible escapes such as ⟨U+202E⟩.
// It is the one such renderer (STYLE.md practices 9 and 14): the approval
// message is built with it once, and channels only lay out its result.
package safetext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/runenames"
)

// Fence prefixes start every line of agent text in plain-text channels
// (the approval email's text part, the console, Slack): no agent text can
// start a line of its own, so none can pass for the template's words.
// FenceWrap starts the continuation of a line that was wrapped.
const (
	Fence     = "│ "
	FenceWrap = "┆ "
)

// Escape returns s with every hidden character shown as ⟨U+XXXX⟩, and the
// distinct hidden characters it found, in order of first appearance.
// multiline keeps line feeds and tabs (bodies); otherwise they are escaped
// too (names, addresses, subjects, paths), so a one-line value stays on
// one line.
func Escape(s string, multiline bool) (string, []rune) {
	if plain(s, multiline) {
		return s, nil
	}
	var found []rune
	var b strings.Builder
	clean := true
	prev := rune(-1)
	for i, r := range s {
		if r == utf8.RuneError {
			// Invalid UTF-8 shows as the replacement character, which is
			// visible; a literal U+FFFD is kept as is.
			prev = r
			if clean {
				b.Grow(len(s))
				b.WriteString(s[:i])
				clean = false
			}
			b.WriteRune(utf8.RuneError)
			continue
		}
		next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):])
		hide := Hidden(r) && !(multiline && (r == '\n' || r == '\t')) && !emojiPart(prev, r, next)
		if hide {
			if clean {
				b.Grow(len(s) + 16)
				b.WriteString(s[:i])
				clean = false
			}
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
			if !containsRune(found, r) {
				found = append(found, r)
			}
		} else if !clean {
			b.WriteRune(r)
		}
		prev = r
	}
	if clean {
		return s, nil
	}
	return b.String(), found
}

// plain reports whether s is printable ASCII (and line feeds and tabs when
// multiline), which Escape returns as it is: most text is, and this
// answers for it without decoding a rune.
func plain(s string, multiline bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && !(multiline && (c == '\n' || c == '\t')) || c >= 0x7f {
			return false
		}
	}
	return true
}

// Line escapes a one-line value.
func Line(s string) string { out, _ := Escape(s, false); return out }

// Block escapes a multi-line value.
func Block(s string) string { out, _ := Escape(s, true); return out }

// Hidden reports whether r renders as nothing or acts on the text around
// it instead of showing: controls (C0, C1, DEL), format characters (Cf:
// bidi embeddings, overrides and isolates, marks, zero-width space and
// joiners, word joiner, BOM, soft hyphen, tags), the other default
// ignorable code points (Hangul fillers, combining grapheme joiner…),
// variation selectors, line and paragraph separators, and unassigned code
// points, whose look no one can predict.
func Hidden(r rune) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7f
	}
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	case unicode.Is(unicode.Cf, r),
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r),
		unicode.Is(unicode.Variation_Selector, r):
		return true
	case r >= 0xE0000 && r <= 0xE0FFF: // tags and reserved default ignorables
		return true
	case unicode.Is(unicode.Co, r):
		return false // private use: shows as a glyph or a box
	}
	return !unicode.IsGraphic(r) && r != utf8.RuneError
}

// emojiPart allows the few hidden characters that only shape an emoji the
// reader sees anyway: a presentation selector (U+FE0E, U+FE0F) right after
// a symbol, and a zero-width joiner between two pictographs (family and
// profession emoji). Anything else of the kind is escaped.
func emojiPart(prev, r, next rune) bool {
	switch r {
	case 0xFE0E, 0xFE0F:
		return prev >= 0 && (unicode.Is(unicode.So, prev) || next == 0x20E3 && strings.ContainsRune("0123456789#*", prev))
	case 0x200D:
		return prev >= 0 && (unicode.Is(unicode.So, prev) || prev == 0xFE0F || unicode.Is(unicode.Sk, prev)) && unicode.Is(unicode.So, next)
	}
	return false
}

// ContainsHidden reports whether s holds a character that Escape would
// escape in the given mode.
func ContainsHidden(s string, multiline bool) bool {
	_, found := Escape(s, multiline)
	return len(found) > 0
}

// Describe names a character for a warning: "U+202E RIGHT-TO-LEFT OVERRIDE".
func Describe(r rune) string {
	name := runenames.Name(r)
	if name == "" || strings.HasPrefix(name, "<") {
		if r < 0x20 || r >= 0x7f && r <= 0x9f {
			return fmt.Sprintf("U+%04X (a control character)", r)
		}
		return fmt.Sprintf("U+%04X", r)
	}
	return fmt.Sprintf("U+%04X %s", r, name)
}

func containsRune(l []rune, r rune) bool {
	for _, x := range l {
		if x == r {
			return true
		}
	}
	return false
}

// FenceLines returns the physical lines of agent text s for a plain-text
// channel: each line starts with Fence, and a line longer than width runes
// is wrapped, its continuations starting with FenceWrap, so that no agent
// text lands at the start of a line however the reader's screen wraps long
// lines (width 0: no wrapping). s must be escaped already. An empty s is
// one fenced empty line.
func FenceLines(s string, width int) []string {
	s = strings.TrimSuffix(s, "\n")
	var out []string
	for _, line := range strings.Split(s, "\n") {
		prefix := Fence
		for width > 0 && utf8.RuneCountInString(line) > width {
			cut := byteIndex(line, width)
			// Break after a space in the second half of the line, if any.
			if sp := strings.LastIndexByte(line[:cut], ' '); sp >= cut/2 {
				cut = sp + 1
			}
			out = append(out, strings.TrimRight(prefix+line[:cut], " "))
			line = line[cut:]
			prefix = FenceWrap
		}
		out = append(out, strings.TrimRight(prefix+line, " "))
	}
	return out
}

// FenceText is FenceLines joined with line feeds, ending with one.
func FenceText(s string, width int) string {
	return strings.Join(FenceLines(s, width), "\n") + "\n"
}

func byteIndex(s string, n int) int {
	i := 0
	for j := range s {
		if i == n {
			return j
		}
		i++
	}
	return len(s)
}
