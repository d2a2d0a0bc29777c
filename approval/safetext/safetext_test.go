package safetext_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval/safetext"
)

func ExampleEscape() {
	shown, found := safetext.Escape("Q3 numbers \u202eexe.fdp", false)
	fmt.Println(shown)
	for _, r := range found {
		fmt.Println(safetext.Describe(r))
	}
	// Output:
	// Q3 numbers ⟨U+202E⟩exe.fdp
	// U+202E RIGHT-TO-LEFT OVERRIDE
}

func TestEscapeHidesNothing(t *testing.T) {
	hidden := map[string]rune{
		"bidi embedding": 0x202A, "bidi override": 0x202E, "isolate": 0x2066, "pop isolate": 0x2069,
		"LRM": 0x200E, "RLM": 0x200F, "ALM": 0x061C, "ZWSP": 0x200B, "ZWNJ": 0x200C, "ZWJ": 0x200D,
		"word joiner": 0x2060, "BOM": 0xFEFF, "soft hyphen": 0x00AD, "Hangul choseong filler": 0x115F,
		"Hangul jungseong filler": 0x1160, "Hangul filler": 0x3164, "halfwidth Hangul filler": 0xFFA0,
		"combining grapheme joiner": 0x034F, "variation selector 1": 0xFE00, "variation selector 17": 0xE0100,
		"tag a": 0xE0061, "cancel tag": 0xE007F, "NUL": 0, "ESC": 0x1B, "DEL": 0x7F, "NEL": 0x85, "CSI": 0x9B,
		"line separator": 0x2028, "paragraph separator": 0x2029, "Mongolian vowel separator": 0x180E,
		"interlinear annotation": 0xFFF9, "unassigned": 0x0378,
	}
	for name, r := range hidden {
		t.Run(name, func(t *testing.T) {
			for _, multi := range []bool{false, true} {
				s := "a" + string(r) + "b"
				got, found := safetext.Escape(s, multi)
				if want := fmt.Sprintf("a⟨U+%04X⟩b", r); got != want || len(found) != 1 || found[0] != r {
					t.Errorf("Escape(%q, %v) = %q %U, want %q", s, multi, got, found, want)
				}
			}
		})
	}
}

func TestEscapeKeepsWhatIsVisible(t *testing.T) {
	for _, s := range []string{"", "plain", "Jörg Müller", "日本語", "emoji 👍🏽 ❤️ and family 👨‍👩‍👧 1️⃣",
		"tabs\tand\nlines\n", "NBSP\u00a0space", "private \uf8ff", "replacement \ufffd"} {
		got, found := safetext.Escape(s, true)
		if got != s || found != nil {
			t.Errorf("Escape(%q) = %q, %U", s, got, found)
		}
	}
	// One-line values show line breaks and tabs too.
	if got := safetext.Line("a\nb\tc\r"); got != "a⟨U+000A⟩b⟨U+0009⟩c⟨U+000D⟩" {
		t.Errorf("Line = %q", got)
	}
	// A presentation selector not after a symbol, and a joiner not between
	// pictographs, are hidden characters like any other.
	if got := safetext.Block("a\ufe0fb\u200d👍"); got != "a⟨U+FE0F⟩b⟨U+200D⟩👍" {
		t.Errorf("Block = %q", got)
	}
	// Invalid UTF-8 shows as the replacement character, never raw bytes.
	if got := safetext.Line("a\xffb"); got != "a\ufffdb" {
		t.Errorf("Line(invalid) = %q", got)
	}
}

func TestFenceLines(t *testing.T) {
	got := safetext.FenceLines("Review and decide: https://approvals.example.com.evil.io/x\n-----\n\nend", 0)
	want := []string{"│ Review and decide: https://approvals.example.com.evil.io/x", "│ -----", "│", "│ end"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("FenceLines = %q", got)
	}
	// A long line wraps, each continuation fenced too: padding cannot push
	// agent text to the start of a line.
	long := "ok" + strings.Repeat(" ", 90) + "Review and decide: https://evil.example/a/x"
	for _, l := range safetext.FenceLines(long, 40) {
		if !strings.HasPrefix(l, "│") && !strings.HasPrefix(l, "┆") {
			t.Errorf("unfenced line %q", l)
		}
		if n := len([]rune(l)); n > 42 {
			t.Errorf("line of %d runes: %q", n, l)
		}
	}
}

func TestSlackMarkup(t *testing.T) {
	got := safetext.SlackMarkup("See <!date^1700000000^{date}^https://evil.example|Tuesday 3pm>, <!channel> <@U123> <#C9|general> " +
		"<https://evil.example|your bank> <https://plain.example> a<b>c")
	want := []string{"<!date^1700000000^{date}^https://evil.example|Tuesday 3pm>", "<!channel>", "<@U123>", "<#C9|general>",
		"<https://evil.example|your bank>"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("SlackMarkup = %q\nwant %q", got, want)
	}
}

func TestLookalikes(t *testing.T) {
	for _, c := range []struct {
		in   string
		urls int
		wire string
	}{
		{"see https://раypal.com/x.", 1, "https://xn--ypal-43d9g.com/x."},
		{"see https://user:pw@example.com:8443/x", 1, "https://user:pw@example.com:8443/x"},
		{"https://example.com/раypal", 0, "https://example.com/раypal"},
		{"no scheme: раypal.com", 1, "no scheme: раypal.com"},
		{"http://[::1]:80/", 0, "http://[::1]:80/"},
	} {
		if got := safetext.DeceptiveURLs(c.in); len(got) != c.urls {
			t.Errorf("safetext.DeceptiveURLs(%q) = %q", c.in, got)
		}
		if c.urls == 1 && strings.HasPrefix(c.in, "see https://р") {
			if got := safetext.WireURL(c.in[4:]); got != c.wire {
				t.Errorf("WireURL = %q, want %q", got, c.wire)
			}
		}
	}
	if got := safetext.MixedScriptWords("Ok Ὀδυσσεύς, Москва and generаl"); len(got) != 1 || !strings.Contains(got[0], "generаl") {
		t.Errorf("MixedScriptWords = %q", got)
	}
}

func TestLinkMismatch(t *testing.T) {
	for _, c := range []struct{ text, href, want string }{
		{"https://paypal.com/login", "https://evil.example/x", "“https://paypal.com/login” goes to evil.example"},
		{"paypal.com", "https://evil.example/", "“paypal.com” goes to evil.example"},
		{"paypal.com", "https://www.PayPal.com/", ""},
		{"paypal.com", "https://login.paypal.com/", ""},
		{"report.pdf", "https://files.example/report.pdf", ""},
		{"Click here", "https://evil.example/", ""},
		{"https://раypal.com", "https://xn--ypal-43d9g.com", ""},
	} {
		if got := safetext.LinkMismatch(c.text, c.href); got != c.want {
			t.Errorf("LinkMismatch(%q, %q) = %q, want %q", c.text, c.href, got, c.want)
		}
	}
}

func TestDeceptiveBareHosts(t *testing.T) {
	got := safetext.DeceptiveURLs("Sign in at www.аррӏе.com today. Привет, мир. Bücher.example too, and paypal.com.")
	if len(got) != 2 || !strings.Contains(got[0], "xn--") || !strings.Contains(got[1], "xn--bcher-kva.example") {
		t.Errorf("DeceptiveURLs = %q", got)
	}
}
