package htmlview

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Mismatch says how the words of an HTML part and its text part differ.
type Mismatch struct {
	// OnlyHTML and OnlyText are the distinct words found in one part and
	// not the other, in order of appearance.
	OnlyHTML, OnlyText []string
	// Differs is true when the difference is material: a number (an
	// amount, an account, a date) that only one part has, or more than a
	// fifth of either part's words (counted as often as they occur)
	// missing from the other.
	// Wording around links ("click here" beside a spelled-out address)
	// and a few extra words ("View in browser") do not count.
	Differs bool
}

// Compare compares the words a reader sees in the HTML part (View.Words)
// with the text part. Words of the text part that appear in a link target
// of the HTML part count as present (text parts spell out links).
func Compare(v View, text string) Mismatch {
	hw, tw := Words(v.Words), Words(text)
	inHTML, inText := set(hw), set(tw)
	var hrefs []string
	for _, l := range v.Links {
		hrefs = append(hrefs, Words(l.Href)...)
	}
	inHref := set(hrefs)
	var m Mismatch
	numbers := false
	missingH, missingT := 0, 0 // words, counted as often as they occur
	listed := map[string]bool{}
	for _, w := range hw {
		if inText[w] {
			continue
		}
		missingH++
		if !listed[w] {
			listed[w] = true
			m.OnlyHTML = append(m.OnlyHTML, w)
			numbers = numbers || isNumber(w)
		}
	}
	clear(listed)
	for _, w := range tw {
		if inHTML[w] || inHref[w] {
			continue
		}
		missingT++
		if !listed[w] {
			listed[w] = true
			m.OnlyText = append(m.OnlyText, w)
			numbers = numbers || isNumber(w)
		}
	}
	m.Differs = numbers || 5*missingH > len(hw) || 5*missingT > len(tw)
	return m
}

// Words splits s into lowercase words of letters, marks and digits, after
// compatibility normalization (so "ｗｉｒｅ" is "wire"). Separators
// between digits are dropped, so "$50,000", "50.000" and "50000" are one
// number.
func Words(s string) []string {
	s = strings.ToLower(norm.NFKC.String(s))
	var out []string
	var cur []rune
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			cur = append(cur, r)
			continue
		case (r == ',' || r == '.' || r == '\'' || r == ' ') && len(cur) > 0 && unicode.IsDigit(cur[len(cur)-1]) &&
			i+1 < len(rs) && unicode.IsDigit(rs[i+1]) && r != ' ':
			continue
		}
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	if len(cur) > 0 {
		out = append(out, string(cur))
	}
	return out
}

func isNumber(w string) bool {
	for _, r := range w {
		if unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

func set(l []string) map[string]bool {
	m := make(map[string]bool, len(l))
	for _, w := range l {
		m[w] = true
	}
	return m
}
