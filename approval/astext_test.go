package approval_test

import (
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/htmlview"
)

func TestFieldAsText(t *testing.T) {
	for _, tc := range []struct {
		name               string
		f                  approval.ShownField
		label, size, value string
		laidOut            bool
	}{
		{"label", approval.ShownField{Name: "to", Label: "To", Value: "ada@client.example"},
			"To", "", "ada@client.example", true},
		{"no label", approval.ShownField{Name: "subject", Value: "Hi"}, "subject", "", "Hi", true},
		{"long", approval.ShownField{Name: "text", Label: "Text", Value: "a\nb", Long: true, Lines: 2, Chars: 3},
			"Text", " (2 lines, 3 characters)", "a\nb", true},
		{"html", approval.ShownField{Name: "html", Label: "HTML", Value: "<p>x</p>", HTML: &approval.HTMLPart{
			Text: "Pay [1] now", Links: []htmlview.Link{{N: 1, Text: "here", Href: "https://evil.example/"}}}},
			"HTML, as the recipient will read it", "", "Pay [1] now\n[1] here → https://evil.example/", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			label, size, value, laidOut := tc.f.AsText()
			if label != tc.label || size != tc.size || value != tc.value || laidOut != tc.laidOut {
				t.Errorf("AsText() = %q, %q, %q, %v; want %q, %q, %q, %v",
					label, size, value, laidOut, tc.label, tc.size, tc.value, tc.laidOut)
			}
		})
	}
}
