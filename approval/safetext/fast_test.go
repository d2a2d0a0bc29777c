package safetext

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The fast paths (plain, ASCII in Hidden) answer as the general rules do.
func TestFastPathsAgreeWithTheRules(t *testing.T) {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		slow := r < 0x20 || r >= 0x7f && r <= 0x9f || unicode.Is(unicode.Cf, r) ||
			unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Variation_Selector, r) ||
			!unicode.IsGraphic(r)
		if Hidden(r) != slow {
			t.Errorf("Hidden(%U) = %v, the rules say %v", r, Hidden(r), slow)
		}
		for _, multiline := range []bool{false, true} {
			s := "a" + string(r) + "b"
			want := !Hidden(r) || multiline && (r == '\n' || r == '\t')
			if plain(s, multiline) != want {
				t.Errorf("plain(%q, %v) = %v", s, multiline, !want)
			}
		}
	}
	if plain("caf\u00e9", true) || plain("a\u202eb", true) {
		t.Error("non-ASCII text is not plain")
	}
}

func BenchmarkEscape(b *testing.B) {
	text := strings.Repeat("Thank you for the figures; the summary is attached.\n", 20)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Escape(text, true)
	}
}
