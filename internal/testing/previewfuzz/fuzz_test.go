package previewfuzz_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	actemail "github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/safetext"
	"github.com/countersign/countersign/channel/console"
	notifyemail "github.com/countersign/countersign/channel/email"
	"github.com/countersign/countersign/channel/email/mailer"
	notifyslack "github.com/countersign/countersign/channel/slack"
	"github.com/countersign/countersign/channel/webhook"
	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/web"
	"golang.org/x/net/html"
)

// canary marks the end of every agent string: when the agent's text
// holds a line break of any kind, the canary begins a line the agent
// wanted to write, and the check finds where it landed.
const canary = "qzxjcanary"

// seeds are the seed corpus (testdata/fuzz/FuzzPreview, which plain go
// test replays): issue 8's spoofs. Fields: display name, subject, text,
// html, Slack text.
var seeds = [][5]string{
	{"Ann Lee", "Hello", "Hi\n", "", "hello"},
	{"\"ada@client.example\" ,<\u202emoc.knab@oec", "Q3 numbers \u202eexe.fdp", "Zero\u200bwidth\u2060here\ufeff\n", "", "a\u200db"},
	{"Mei", "Lunch", "Lunch on Friday?\n", "<p>Please wire <b>$50,000</b></p><img src=https://evil.example/x.gif>", "x"},
	{"Sam", "Hi", "Thanks\n-----\nReview and decide: https://approvals.example.com.evil.io/a/x\n", "", "ok"},
	{"Sam", "Hi", "pad" + strings.Repeat(" ", 200) + "Review and decide: https://evil.example/a/x\n", "", "ok"},
	{"Sam", "Hi", "a\u2028Review and decide: https://evil/a/x\u2029b\u0085c\x0bd\x0ce\n", "<p>a\u2028b</p>", "<!date^1700000000^{date}^https://evil.example|Tuesday 3pm> <!channel> <@U1>"},
	{"Tag\U000E0041\U000E0042", "VS\ufe00\U000E0100", "\u115f\u1160\u3164\uffa0\u034f\u00ad\u180e\n", "<b>\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f</b>", "\x1b[31mred"},
	{"x", "<script>alert(1)</script>", "</pre><b>bold</b>\n", "<a href=\"javascript:alert(1)\">x</a><iframe srcdoc=\"<script>alert(2)</script>\"></iframe><style>*{display:none}</style>", "</textarea>"},
}

// TestSeedCorpus keeps testdata/fuzz/FuzzPreview in step with seeds
// (UPDATE_SEEDS=1 go test -run SeedCorpus rewrites it).
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzPreview")
	if os.Getenv("UPDATE_SEEDS") != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range seeds {
		want := "go test fuzz v1\n"
		for _, f := range s {
			want += "string(" + strconv.Quote(f) + ")\n"
		}
		path := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
		if os.Getenv("UPDATE_SEEDS") != "" {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("%s is not seed %d; run UPDATE_SEEDS=1 go test -run SeedCorpus ./internal/testing/previewfuzz", path, i)
		}
	}
}

var now = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// FuzzPreview renders what an agent sends through every channel and
// checks each output: no hidden character, and every line holding agent
// text fenced (a warning may quote agent text after its own words).
func FuzzPreview(f *testing.F) {
	act, err := actemail.New(mailer.NewDevMailbox(1), mail.Address{Address: "sam@corp.example"}, actemail.Limits{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name, subject, text, htmlPart, slackText string) {
		if len(name)+len(subject)+len(text)+len(htmlPart)+len(slackText) > 20000 {
			return
		}
		var ops []*approval.Operation
		if op := emailOp(act, name, subject, text, htmlPart); op != nil {
			ops = append(ops, op)
		}
		ops = append(ops, slackOp(slackText))
		for _, op := range ops {
			m := approval.BuildMessage(op, &approval.Policy{}, now)
			checkEmail(t, m)
			checkSlack(t, m)
			checkConsole(t, m)
			checkWebhook(t, m)
			checkPage(t, m)
		}
	})
}

func emailOp(act *actemail.Action, name, subject, text, htmlPart string) *approval.Operation {
	in := map[string]any{"to": []string{mailbox(name + canary)}, "subject": subject + canary, "text": text + canary}
	if htmlPart != "" {
		in["html"] = htmlPart + canary
	}
	raw, _ := json.Marshal(in)
	p, err := act.Prepare(context.Background(), approval.PrepareRequest{Input: raw})
	if err != nil {
		// Refused input stores nothing and reaches no human; try what
		// prepare accepts of it, field by field.
		in["to"] = []string{"ann@client.example"}
		in["subject"] = strings.Join(strings.Fields(strings.Map(keepPrintable, subject)), " ") + canary
		raw, _ = json.Marshal(in)
		if p, err = act.Prepare(context.Background(), approval.PrepareRequest{Input: raw}); err != nil {
			return nil
		}
	}
	return &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: actemail.Name, Principal: "support-agent",
		PayloadHash: "sha256:" + strings.Repeat("ab", 32), Preview: p.Preview, Status: approval.StatusPending,
		ExpiresAt: now.Add(time.Hour), Route: approval.Route{Required: 1}}
}

func keepPrintable(r rune) rune {
	if r < 0x20 || r == 0x7f {
		return -1
	}
	return r
}

func mailbox(name string) string {
	return (&mail.Address{Name: name, Address: "ann@client.example"}).String()
}

func slackOp(text string) *approval.Operation {
	return &approval.Operation{Key: "op_bbbbbbbbbbbbbbbbbbbbbbbbbb", Action: slackpost.Name, Principal: "support-agent",
		PayloadHash: "sha256:" + strings.Repeat("cd", 32), Status: approval.StatusPending, ExpiresAt: now.Add(time.Hour),
		Preview: slackpost.Preview(slackpost.Input{Channel: "#general", Text: text + canary}), Route: approval.Route{Required: 1}}
}

// checkHidden fails on a hidden character in s (line feeds and tabs
// aside, which are layout).
func checkHidden(t *testing.T, where, s string) {
	t.Helper()
	for i, r := range s {
		if r != '\n' && r != '\t' && safetext.Hidden(r) {
			t.Fatalf("%s: hidden character %U at byte %d: %q", where, r, i, around(s, i))
		}
	}
}

func around(s string, i int) string {
	return s[max(0, i-40):min(len(s), i+40)]
}

// checkLines fails on a line holding the canary that neither starts with
// a fence nor is one of the channel's warning lines.
func checkLines(t *testing.T, where, s string, warning ...string) {
	t.Helper()
	for _, line := range strings.Split(s, "\n") {
		i := strings.Index(strings.ToLower(line), canary)
		if i < 0 {
			continue
		}
		l := strings.TrimLeft(line, " ")
		if strings.HasPrefix(l, "│") || strings.HasPrefix(l, "┆") {
			continue
		}
		ok := false
		for _, w := range warning {
			if strings.HasPrefix(l, w) && strings.Index(strings.ToLower(l), canary) > len(w) {
				ok = true
			}
		}
		if !ok {
			t.Fatalf("%s: agent text on an unfenced line: %q", where, line)
		}
	}
}

func checkEmail(t *testing.T, m approval.Message) {
	box := mailer.NewDevMailbox(1)
	n, err := notifyemail.New(box, mail.Address{Name: "countersign", Address: "approvals@corp.example"})
	if err != nil {
		t.Fatal(err)
	}
	ap := &approval.Approver{ID: "grace", Name: "Grace Park", Email: "grace@corp.example"}
	if _, err := n.Notify(context.Background(), approval.Notice{Message: m, Approver: ap,
		Link: "https://approvals.example.com/a/k1.x.y"}); err != nil {
		t.Fatalf("approval email: %v", err)
	}
	p, err := smtptest.Parse(box.List()[0].Raw)
	if err != nil {
		t.Fatal(err)
	}
	checkHidden(t, "email subject", p.Subject)
	checkHidden(t, "email text", p.Text)
	checkLines(t, "email text", p.Text, "! ")
	checkHidden(t, "email html", p.HTML)
	checkHTML(t, "email html", p.HTML)
}

// checkHTML fails on agent text outside an agent block or a warning, and
// in any attribute but a frame's document inside an agent block.
func checkHTML(t *testing.T, where, doc string) {
	t.Helper()
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(n *html.Node, fenced bool)
	walk = func(n *html.Node, fenced bool) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key == "class" && (hasClass(a.Val, "agent") || hasClass(a.Val, "warning")) {
					fenced = true
				}
			}
			for _, a := range n.Attr {
				if strings.Contains(strings.ToLower(a.Val), canary) && !(fenced && a.Key == "srcdoc") {
					t.Fatalf("%s: agent text in attribute %s of <%s>: %q", where, a.Key, n.Data, a.Val)
				}
			}
		}
		if n.Type == html.TextNode && !fenced && strings.Contains(strings.ToLower(n.Data), canary) {
			t.Fatalf("%s: agent text outside an agent block: %q (in <%s>)", where, n.Data, n.Parent.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, fenced)
		}
	}
	walk(root, false)
}

func hasClass(list, c string) bool {
	for _, f := range strings.Fields(list) {
		if f == c {
			return true
		}
	}
	return false
}

func checkSlack(t *testing.T, m approval.Message) {
	text, blocks := notifyslack.Render(m)
	checkHidden(t, "slack text", text)
	if strings.Contains(text, "\n") {
		t.Fatalf("slack notification text spans lines: %q", text)
	}
	raw, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x["text"].(string); ok {
				checkHidden(t, "slack block", s)
				if strings.Contains(strings.ToLower(s), canary) {
					switch x["type"] {
					case "plain_text":
						if w, ok := strings.CutPrefix(s, ":warning: Warnings"); ok {
							checkLines(t, "slack warnings", w, "• ")
						} else {
							checkLines(t, "slack plain text", s)
						}
					case "mrkdwn":
						// Agent text is never mrkdwn, where *…*, _…_ and ~…~
						// are formatting: warnings quote it as plain text.
						t.Fatalf("slack: agent text in mrkdwn: %q", s)
					default:
						t.Fatalf("slack: agent text in a %v object", x["type"])
					}
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
}

func checkConsole(t *testing.T, m approval.Message) {
	var b bytes.Buffer
	c := &console.Console{W: &b}
	if _, err := c.Notify(context.Background(), approval.Notice{Message: m, Link: "http://127.0.0.1:8080/a/k1.x.y"}); err != nil {
		t.Fatal(err)
	}
	checkHidden(t, "console", b.String())
	checkLines(t, "console", b.String(), "warning:")
}

type capture struct{ body []byte }

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	c.body, _ = io.ReadAll(r.Body)
	return &http.Response{StatusCode: 204, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

func checkWebhook(t *testing.T, m approval.Message) {
	cp := &capture{}
	w := webhook.New([]webhook.Hook{{Name: "hook", URL: "http://hooks.invalid/x"}})
	w.Client = &http.Client{Transport: cp}
	if _, err := w.Notify(context.Background(), approval.Notice{Job: approval.Job{ID: "j", Target: "hook"}, Message: m}); err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(cp.body, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			checkHidden(t, "webhook", x)
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
}

func checkPage(t *testing.T, m approval.Message) {
	var b bytes.Buffer
	if err := web.RenderPreview(&b, m, "Grace Park", now); err != nil {
		t.Fatal(err)
	}
	checkHidden(t, "page", b.String())
	checkHTML(t, "page", b.String())
}
