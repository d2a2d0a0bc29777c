package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

// Issue 11: with settings.email_from set to the requester's human, the
// approval request still comes from countersign's own sender (the SMTP
// URL's from, or notify_from), while the approved email.send comes from
// email_from; Message-IDs are at each sender's domain, the approval
// email's the same on every delivery; and the invoice is attached, as the
// README's example says.
func TestEmailSendersMessageIDsAndAttachment(t *testing.T) {
	for _, c := range []struct {
		name, settings, approvalsFrom string
	}{
		{"smtp url's from", `settings: {email_from: "Sam Lee <sam@example.com>"}`, "countersign@corp.example"},
		{"notify_from", `settings: {email_from: "Sam Lee <sam@example.com>", notify_from: "Approvals <approvals@notify.example>"}`, "approvals@notify.example"},
	} {
		t.Run(c.name, func(t *testing.T) {
			smtp := smtptest.Start(t, smtptest.Options{})
			u := smtp.URL() + "&from=" + url.QueryEscape("countersign <countersign@corp.example>")
			srv := startService(t, serviceOpts{Config: loopConfig(1, "email") + c.settings, Env: map[string]string{"COUNTERSIGN_SMTP_URL": u}})

			pdf := []byte("%PDF-1.7\n%%EOF\n")
			body, _ := json.Marshal(map[string]any{"action": "email.send", "input": map[string]any{
				"to": []string{"Client <client@client.example>"}, "subject": "Your invoice", "text": "Hello,\nthe invoice is attached.\n",
				"attachments": []map[string]string{{"name": "invoice.pdf", "content_type": "application/pdf",
					"content_base64": base64.StdEncoding.EncodeToString(pdf)}}}})
			o := srv.prepareSend(t, string(body))
			link := approvalLink(t, smtp, "grace@example.com")

			req := sentTo(smtp, "grace@example.com")[0]
			p, err := req.Parse()
			must(t, err)
			from, _ := p.Addresses("From")
			if req.From != c.approvalsFrom || len(from) != 1 || from[0].Address != c.approvalsFrom {
				t.Errorf("approval request from %q (header %v); want %s, never the requester's human", req.From, from, c.approvalsFrom)
			}
			domain := c.approvalsFrom[strings.IndexByte(c.approvalsFrom, '@')+1:]
			if id := p.Header.Get("Message-Id"); !strings.HasPrefix(id, "<"+o.Key+".approval.") || !strings.HasSuffix(id, "@"+domain+">") {
				t.Errorf("approval request Message-ID %s; want <%s.approval.…@%s>", id, o.Key, domain)
			}
			sum := sha256.Sum256(pdf)
			if !strings.Contains(p.Text, "invoice.pdf") || !strings.Contains(p.Text, hex.EncodeToString(sum[:])[:16]) {
				t.Errorf("the approval request does not show the attachment and its fingerprint:\n%s", p.Text)
			}

			if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
				t.Fatalf("approve: %d", st)
			}
			srv.waitFor(t, o.Key, "succeeded")
			var sent *smtptest.Parsed
			deadline := time.Now().Add(5 * time.Second)
			for sent == nil && time.Now().Before(deadline) {
				if ms := sentTo(smtp, "client@client.example"); len(ms) == 1 {
					if ms[0].From != "sam@example.com" {
						t.Errorf("email.send envelope from %q, want sam@example.com (email_from)", ms[0].From)
					}
					sent, err = ms[0].Parse()
					must(t, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if sent == nil {
				t.Fatal("the approved email did not arrive")
			}
			if id := sent.Header.Get("Message-Id"); id != "<"+o.Key+"@example.com>" {
				t.Errorf("email.send Message-ID %s, want <%s@example.com>", id, o.Key)
			}
			if len(sent.Attachments) != 1 || sent.Attachments[0].Name != "invoice.pdf" || string(sent.Attachments[0].Data) != string(pdf) {
				t.Errorf("attachments arrived: %+v", sent.Attachments)
			}
		})
	}
}

// prepare_email takes attachments as email.send does: shown with their
// fingerprint, refused field by field.
func TestMCPPrepareEmailWithAttachment(t *testing.T) {
	srv := startService(t, serviceOpts{})
	cs := mcpHTTP(t, srv, srv.APIKey, &syncBuffer{})
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.7\n%%EOF\n"))
	o := mcpOK(t, cs, "prepare_email", emailTo("ada@client.example", map[string]any{
		"attachments": []map[string]string{{"name": "invoice.pdf", "content_type": "application/pdf", "content_base64": pdf}}}))
	var shown string
	for _, f := range o.op.Preview.Fields {
		if f.Name == "attachments[0]" {
			shown = f.Value
		}
	}
	if !strings.HasPrefix(shown, "invoice.pdf · application/pdf · 15 bytes · SHA-256 ") {
		t.Errorf("attachment shown as %q", shown)
	}
	bad := mcpFails(t, cs, "prepare_email", emailTo("ada@client.example", map[string]any{
		"attachments": []map[string]string{{"name": "a.pdf", "content_type": "application/pdf", "content_base64": pdf, "path": "/etc/passwd"}}}),
		"invalid_input")
	if !strings.Contains(bad.err.Message+string(must2(json.Marshal(bad.err.Details))), "attachments") {
		t.Errorf("refusal does not name attachments: %+v", bad.err)
	}
}

func must2(b []byte, _ error) []byte { return b }
