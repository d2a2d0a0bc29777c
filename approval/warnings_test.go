package approval_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// The agent's preview listed only the action's warnings, while the page
// also warned of hidden characters, look-alike links and an HTML part
// that says something else (issue 19): the agent view now lists every
// warning a human is shown, in the same order, each with a stable code,
// "irreversible" first and still a plain string.
func TestAgentViewListsWhatHumansAreWarnedAbout(t *testing.T) {
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	p := approval.Preview{Title: "Send \u202egnp.exe", Summary: "s", Fields: []approval.Field{
		{Name: "text", Label: "Text", Value: "Hello Ada, see you soon.\n", Long: true},
		{Name: "html", Label: "HTML part", Format: approval.FormatHTML, Long: true,
			Value: `<p>Please wire 90000 EUR to DE00 1234 today.</p><p><a href="https://evil.example/">https://bank.example/</a></p>`},
	}}
	p.Warn(approval.WarnIrreversible, "irreversible")
	p.Warnings = append(p.Warnings, "no_etag", "2 hidden (Bcc) recipients")
	op := &approval.Operation{Key: "op_1", Action: "email.send", Status: approval.StatusPending, PayloadHash: "sha256:ab",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), Preview: p}
	v := approval.AgentView(op, now)
	w, codes := slices.Clone(v.Preview.Warnings), slices.Clone(v.Preview.WarningCodes)
	if len(w) != len(codes) || len(w) < 3 || w[0] != "irreversible" || codes[0] != "irreversible" {
		t.Fatalf("warnings %q codes %q", w, codes)
	}
	if codes[1] != "no_etag" || codes[2] != approval.WarnNotice {
		t.Errorf("derived codes %q", codes[1:3])
	}
	// People read a sentence, not the token (issue 24: no jargon).
	if strings.Contains(w[1], "no_etag") || !strings.Contains(w[1], "cannot be caught") {
		t.Errorf("the no_etag warning reads %q", w[1])
	}
	for _, want := range []string{approval.WarnHiddenCharacters, approval.WarnHTMLDiffers, approval.WarnLookalikeLink} {
		if !slices.Contains(codes, want) {
			t.Errorf("no %s in %q", want, codes)
		}
	}
	// The human's message has the same warnings and codes.
	m := approval.BuildMessage(op, &approval.Policy{}, now)
	if !slices.Equal(m.Warnings, w) || !slices.Equal(m.WarningCodes, codes) {
		t.Errorf("message warnings %q %q, agent %q %q", m.Warnings, m.WarningCodes, w, codes)
	}
	// The stored preview is untouched, and a second read (cached) gives
	// the same.
	if len(op.Preview.Warnings) != 3 {
		t.Errorf("stored preview changed: %q", op.Preview.Warnings)
	}
	v.Preview.Warnings[0] = "changed"
	if again := approval.AgentView(op, now); !slices.Equal(again.Preview.Warnings, w) || again.Preview.Warnings[0] != "irreversible" {
		t.Errorf("second read %q", again.Preview.Warnings)
	}
}

// Hidden text that repeats the text part, under a visible HTML part that
// says something else, raised no warning (issue 19 class 4): the human
// (and the agent) are now told both that text is hidden, naming it, and
// that what is visible differs from the text part.
func TestHiddenHTMLTextWarned(t *testing.T) {
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	text := "Hello Ada, lunch on Friday at noon in the usual place? Best, Grace\n"
	op := &approval.Operation{Key: "op_2", Action: "email.send", Status: approval.StatusPending, PayloadHash: "sha256:cd",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), Preview: approval.Preview{Title: "t", Fields: []approval.Field{
			{Name: "text", Label: "Text", Value: text, Long: true},
			{Name: "html", Label: "HTML part", Format: approval.FormatHTML, Long: true, Value: `<style>.c{color:#fefefe}</style>` +
				`<p>Please wire 90000 EUR to DE99 today.</p><div class=c>` + text + `</div><!--[if mso]>Outlook only words<![endif]-->`},
		}}}
	m := approval.BuildMessage(op, &approval.Policy{}, now)
	var hidden, unshown string
	for i, c := range m.WarningCodes {
		switch c {
		case approval.WarnHiddenHTMLText:
			hidden = m.Warnings[i]
		case approval.WarnUnshownHTMLText:
			unshown = m.Warnings[i]
		}
	}
	if !strings.Contains(hidden, "lunch on Friday") || !strings.Contains(hidden, "coloured like its background") {
		t.Errorf("hidden warning %q", hidden)
	}
	if !strings.Contains(unshown, "Outlook only words") {
		t.Errorf("unshown warning %q", unshown)
	}
	if !slices.Contains(m.WarningCodes, approval.WarnHTMLDiffers) {
		t.Errorf("no html_differs_from_text: %q", m.WarningCodes)
	}
	v := approval.AgentView(op, now)
	if !slices.Equal(v.Preview.WarningCodes, m.WarningCodes) {
		t.Errorf("agent codes %q, human %q", v.Preview.WarningCodes, m.WarningCodes)
	}
}
