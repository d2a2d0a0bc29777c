package templates

import (
	"regexp"
	"strings"
	"testing"
)

// TestListsOfCardsHaveNoBullets: a <ul> with a class in the pages (the
// inbox's cards, the page's warnings) is styled without list bullets; a
// browser's default bullet beside a card is a stray glyph the approver
// has to make sense of.
func TestListsOfCardsHaveNoBullets(t *testing.T) {
	css, err := files.ReadFile("countersign.css")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]bool{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".html.tmpl") || strings.HasPrefix(e.Name(), "email_") {
			continue // emails carry inline styles, not this style sheet
		}
		b, _ := files.ReadFile(e.Name())
		for _, m := range regexp.MustCompile(`<ul class="([a-z-]+)`).FindAllStringSubmatch(string(b), -1) {
			classes[m[1]] = true
		}
	}
	if !classes["inbox"] {
		t.Fatal(`no <ul class="inbox"> in the templates: the test no longer looks at the inbox`)
	}
	for c := range classes {
		rule := regexp.MustCompile(`(?m)^ul\.` + regexp.QuoteMeta(c) + `\{[^}]*list-style:none`)
		if !rule.Match(css) {
			t.Errorf("ul.%s has no list-style:none rule in countersign.css: its items show bullets", c)
		}
	}
}

// TestHiddenCharacterLegendReadsOnce: the legend names ⟨U+…⟩ without an
// opening parenthesis right before it, which reads as "((U+…) marks".
func TestHiddenCharacterLegendReadsOnce(t *testing.T) {
	ents, err := files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, _ := files.ReadFile(e.Name())
		if strings.Contains(string(b), "(⟨U+") {
			t.Errorf("%s: \"(⟨U+…⟩\" reads as a doubled parenthesis", e.Name())
		}
	}
}
