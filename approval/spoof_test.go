package approval_test

import (
	"context"
	"encoding/json"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
)

// The rendering examples of issue 8, at the layer that holds the
// guarantee: the channel-neutral message every channel lays out. Each
// fails if its protection is removed.

func emailMessage(t *testing.T, in map[string]any) approval.Message {
	t.Helper()
	act, err := email.New(mailer.NewDevMailbox(1), mail.Address{Address: "sam@corp.example"}, email.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(in)
	p, err := act.Prepare(context.Background(), approval.PrepareRequest{Input: raw})
	if err != nil {
		t.Fatal(err)
	}
	op := &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: email.Name, Principal: "support-agent",
		PayloadHash: "sha256:00", Preview: p.Preview, Status: approval.StatusPending, ExpiresAt: time.Now().Add(time.Hour)}
	return approval.BuildMessage(op, &approval.Policy{}, time.Now())
}

func field(m approval.Message, name string) approval.ShownField {
	for _, f := range m.Fields {
		if f.Name == name {
			return f
		}
	}
	return approval.ShownField{}
}

func warned(m approval.Message, want string) bool {
	for _, w := range m.Warnings {
		if strings.Contains(w, want) {
			return true
		}
	}
	return false
}

func noHidden(t *testing.T, m approval.Message) {
	t.Helper()
	for _, s := range append([]string{m.Title, m.Summary}, m.Warnings...) {
		if strings.ContainsAny(s, "\u202e\u200b\u200c\u200d\u2066\u2069\ufeff") {
			t.Errorf("a hidden character reaches humans: %q", s)
		}
	}
	for _, f := range m.Fields {
		if strings.ContainsAny(f.Value, "\u202e\u200b\u200c\u200d\u2066\u2069\ufeff") {
			t.Errorf("field %s shows a hidden character: %q", f.Name, f.Value)
		}
	}
}

// A display name holding U+202E made To read as another address.
func TestSpoofBidiDisplayName(t *testing.T) {
	m := emailMessage(t, map[string]any{"to": []string{"\"ada@client.example ,<\u202emoc.knab@oec\" <x@evil.io>"},
		"subject": "Hi", "text": "x"})
	to := field(m, "to").Value
	if !strings.Contains(to, "⟨U+202E⟩") || !strings.HasSuffix(to, "<x@evil.io>") {
		t.Errorf("To shows %q", to)
	}
	if !warned(m, "U+202E RIGHT-TO-LEFT OVERRIDE in To") || !warned(m, "the mail goes to the address in angle brackets") {
		t.Errorf("warnings %q", m.Warnings)
	}
	noHidden(t, m)
}

// A subject "Q3 numbers ⟨U+202E⟩exe.fdp" read as "pdf.exe".
func TestSpoofBidiSubject(t *testing.T) {
	m := emailMessage(t, map[string]any{"to": []string{"ann@client.example"}, "subject": "Q3 numbers \u202eexe.fdp", "text": "x"})
	if got := field(m, "subject").Value; got != "Q3 numbers ⟨U+202E⟩exe.fdp" {
		t.Errorf("Subject shows %q", got)
	}
	if !strings.Contains(m.Summary, "⟨U+202E⟩") || !warned(m, "U+202E RIGHT-TO-LEFT OVERRIDE in Summary, Subject") {
		t.Errorf("summary %q, warnings %q", m.Summary, m.Warnings)
	}
	noHidden(t, m)
}

// Zero-width characters passed through.
func TestSpoofZeroWidth(t *testing.T) {
	m := emailMessage(t, map[string]any{"to": []string{"Ann\u200d Lee <ann@client.example>"}, "subject": "pay\u200bpal", "text": "a\u2060b\ufeffc\u200cd\n"})
	if got := field(m, "text").Value; got != "a⟨U+2060⟩b⟨U+FEFF⟩c⟨U+200C⟩d\n" {
		t.Errorf("Text shows %q", got)
	}
	for _, want := range []string{"U+200D ZERO WIDTH JOINER in To", "U+200B ZERO WIDTH SPACE in Summary, Subject", "U+2060 WORD JOINER in Text"} {
		if !warned(m, want) {
			t.Errorf("no warning %q in %q", want, m.Warnings)
		}
	}
	noHidden(t, m)
}

// An HTML part saying "Please wire $50,000" beside a text part saying
// "Lunch on Friday?" raised no warning; and the other way round.
func TestSpoofHTMLDiffersFromText(t *testing.T) {
	for _, c := range []struct{ name, text, html, only string }{
		{"html says more", "Lunch on Friday?", "<p>Please wire <b>$50,000</b></p>", "Only in the HTML part: “please”, “wire”, “50000”"},
		{"text says more", "Lunch on Friday? Also please wire $50,000 today.", "<p>Lunch on Friday?</p>", "Only in the text part: “also”, “please”, “wire”, “50000”, “today”"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := emailMessage(t, map[string]any{"to": []string{"ann@client.example"}, "subject": "Hi", "text": c.text, "html": c.html})
			if !warned(m, "does not say what the text part says") || !warned(m, c.only) {
				t.Errorf("warnings %q", m.Warnings)
			}
			h := field(m, "html").HTML
			if h == nil || strings.Contains(h.Doc, "<script") {
				t.Fatalf("html part %+v", h)
			}
		})
	}
	same := emailMessage(t, map[string]any{"to": []string{"ann@client.example"}, "subject": "Hi", "text": "Lunch on Friday?", "html": "<p>Lunch on <b>Friday</b>?</p>"})
	if warned(same, "does not say") {
		t.Errorf("a faithful HTML part is flagged: %q", same.Warnings)
	}
}

// Slack markup in agent text is flagged wherever it appears.
func TestSpoofSlackDateLink(t *testing.T) {
	op := slackOp(slackpost.Input{Channel: "#general", Text: "See you <!date^1700000000^{date}^https://evil.example|Tuesday 3pm> <!channel>"})
	m := approval.BuildMessage(op, &approval.Policy{}, time.Now())
	if !warned(m, "Slack would read parts of this text") || !warned(m, "“<!date^1700000000^{date}^https://evil.example|Tuesday 3pm>”") || !warned(m, "“<!channel>”") {
		t.Errorf("warnings %q", m.Warnings)
	}
}

// A link whose host is written with look-alike letters of another script
// (Cyrillic "р" and "а" in "раypal.com") reads as the real site. The
// approver sees where it really goes: the host in its wire form
// (punycode), in the list of link targets and in a warning, wherever the
// URL appears (HTML part, text part, Slack text).
func TestSpoofConfusableLinkHost(t *testing.T) {
	const fake = "https://раypal.com/login"
	m := emailMessage(t, map[string]any{"to": []string{"ann@client.example"}, "subject": "Hi",
		"text": "Log in at " + fake + " today", "html": `<p>Log in at <a href="` + fake + `">https://paypal.com/login</a> today</p>`})
	h := field(m, "html").HTML
	if h == nil || len(h.Links) != 1 {
		t.Fatalf("html part %+v", h)
	}
	if got, want := h.Links[0].Href, "https://xn--ypal-43d9g.com/login"; got != want {
		t.Errorf("link target shown as %q, want %q", got, want)
	}
	if !warned(m, "xn--ypal-43d9g.com") || !warned(m, "раypal.com") {
		t.Errorf("no warning names the real host: %q", m.Warnings)
	}

	op := slackOp(slackpost.Input{Channel: "#general", Text: "Reset it at " + fake})
	if s := approval.BuildMessage(op, &approval.Policy{}, time.Now()); !warned(s, "xn--ypal-43d9g.com") {
		t.Errorf("a Slack text's look-alike host is not flagged: %q", s.Warnings)
	}

	plain := emailMessage(t, map[string]any{"to": []string{"ann@client.example"}, "subject": "Hi",
		"text": "Log in at https://paypal.com/login or https://bücher.example/ today"})
	if !warned(plain, "xn--bcher-kva.example") {
		t.Errorf("an internationalized host is not shown in its wire form: %q", plain.Warnings)
	}
	if warned(plain, "paypal.com") {
		t.Errorf("a plain ASCII link is flagged: %q", plain.Warnings)
	}
}

// A URL with a user name before "@" reads as the user name's site
// ("https://paypal.com@evil.example/") but goes to the host after it.
func TestSpoofURLUserInfo(t *testing.T) {
	m := emailMessage(t, map[string]any{"to": []string{"ann@client.example"}, "subject": "Hi",
		"text": "Log in at https://paypal.com@evil.example/login today"})
	if !warned(m, "evil.example") || !warned(m, "paypal.com@") {
		t.Errorf("a URL's user name is not flagged: %q", m.Warnings)
	}
}

// A word that mixes Latin letters with look-alike letters of another
// script ("generаl" with a Cyrillic "а") is not the word it reads as: a
// Slack channel, a display name or a subject spelled so is flagged.
func TestSpoofMixedScriptWord(t *testing.T) {
	op := slackOp(slackpost.Input{Channel: "#generаl", Text: "Deploy is done. Спасибо, team!"})
	m := approval.BuildMessage(op, &approval.Policy{}, time.Now())
	if !warned(m, "“generаl”") || !warned(m, "U+0430 CYRILLIC SMALL LETTER A") {
		t.Errorf("a mixed-script channel name is not flagged: %q", m.Warnings)
	}
	if warned(m, "Спасибо") {
		t.Errorf("a word written in one script is flagged: %q", m.Warnings)
	}
	e := emailMessage(t, map[string]any{"to": []string{"Аda Lovelace <ada@client.example>"}, "subject": "Invoice", "text": "Hi"})
	if !warned(e, "“Аda”") {
		t.Errorf("a mixed-script display name is not flagged: %q", e.Warnings)
	}
}

// A link whose text is an address ("https://paypal.com/login") but whose
// target is another host is the commonest phishing link: the approver is
// told where it really goes, not only shown both.
func TestSpoofLinkTextNamesAnotherHost(t *testing.T) {
	m := emailMessage(t, map[string]any{"to": []string{"ann@client.example"}, "subject": "Hi", "text": "Log in at https://paypal.com/login today",
		"html": `<p>Log in at <a href="https://evil.example/login">https://paypal.com/login</a> or <a href="https://www.paypal.com/x">paypal.com</a> today</p>`})
	if !warned(m, "“https://paypal.com/login” goes to evil.example") {
		t.Errorf("a link showing another host is not flagged: %q", m.Warnings)
	}
	if warned(m, "“paypal.com” goes to") {
		t.Errorf("a link to the host its text names is flagged: %q", m.Warnings)
	}
}

// A host written without a scheme in look-alike letters ("www.аррӏе.com",
// Cyrillic but for ".com") becomes a link in the recipient's mail program
// all the same: the approver is told its real name.
func TestSpoofConfusableBareHost(t *testing.T) {
	m := emailMessage(t, map[string]any{"to": []string{"ann@client.example"}, "subject": "Hi", "text": "Sign in at www.аррӏе.com today"})
	if !warned(m, "“www.аррӏе.com” is really www.xn--") {
		t.Errorf("a look-alike host without a scheme is not flagged: %q", m.Warnings)
	}
}

// slackOp is a pending slack.post_message of in.
func slackOp(in slackpost.Input) *approval.Operation {
	return &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: slackpost.Name, Principal: "support-agent",
		Status: approval.StatusPending, ExpiresAt: time.Now().Add(time.Hour), Preview: slackpost.Preview(in)}
}
