package email_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

var pdf = []byte("%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")

// attachmentWarnings are the preview's warnings about attachments.
func attachmentWarnings(p approval.Preview) []string {
	var out []string
	for _, w := range p.Warnings {
		if strings.HasPrefix(w, "Attachment ") {
			out = append(out, w)
		}
	}
	return out
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func withAttachments(atts ...map[string]string) string {
	raw, _ := json.Marshal(map[string]any{"to": []string{"ada@client.example"}, "subject": "Your invoice",
		"text": "Hi Ada,\nthe invoice is attached.\n", "attachments": atts})
	return string(raw)
}

func att(name, ct string, data []byte) map[string]string {
	return map[string]string{"name": name, "content_type": ct, "content_base64": b64(data)}
}

// An attachment is normalized with its size and SHA-256 (so the payload
// hash covers exactly these bytes) and shown by name, type, size and
// hash prefix.
func TestAttachmentNormalizedAndShown(t *testing.T) {
	a := newAction(t, mailer.NewDevMailbox(1), email.Limits{})
	// Wrapped base64, as MIME writes it, is accepted and stored canonical.
	wrapped := att("invoice-2026-12.pdf", "Application/PDF", pdf)
	wrapped["content_base64"] = wrapped["content_base64"][:20] + "\r\n" + wrapped["content_base64"][20:]
	p, err := prepare(t, a, withAttachments(wrapped))
	if err != nil {
		t.Fatal(err)
	}
	in := p.Input.(email.Input)
	sum := sha256.Sum256(pdf)
	want := email.Attachment{Name: "invoice-2026-12.pdf", ContentType: "application/pdf", Size: len(pdf),
		SHA256: hex.EncodeToString(sum[:]), Content: b64(pdf)}
	if len(in.Attachments) != 1 || in.Attachments[0] != want {
		t.Fatalf("attachments = %+v, want %+v", in.Attachments, want)
	}
	shown := field(p.Preview, "attachments[0]")
	if wantShown := fmt.Sprintf("invoice-2026-12.pdf · application/pdf · %d bytes · SHA-256 %s…", len(pdf), want.SHA256[:16]); shown != wantShown {
		t.Errorf("preview field = %q, want %q", shown, wantShown)
	}
	if !strings.Contains(p.Preview.Summary, "with 1 attachment") {
		t.Errorf("summary %q does not mention the attachment", p.Preview.Summary)
	}
	if w := attachmentWarnings(p.Preview); len(w) != 0 {
		t.Errorf("a PDF named and declared as a PDF is warned about: %v", w)
	}
	if p.Attrs["attachments"] != "1" {
		t.Errorf("route attribute attachments = %q", p.Attrs["attachments"])
	}

	// Other bytes are another payload.
	other, err := prepare(t, a, withAttachments(att("invoice-2026-12.pdf", "application/pdf", append(pdf, ' '))))
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := approval.Canonical(p.Input)
	h2, _ := approval.Canonical(other.Input)
	if bytes.Equal(h1, h2) {
		t.Error("two attachments of different content normalize alike")
	}
}

func TestAttachmentWarnings(t *testing.T) {
	a := newAction(t, mailer.NewDevMailbox(1), email.Limits{})
	exe := append([]byte("MZ\x90\x00"), bytes.Repeat([]byte{0}, 60)...)
	zip := []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00")
	for _, c := range []struct {
		name string
		att  map[string]string
		want []string // substrings of the warnings, in order
	}{
		{"double extension", att("invoice.pdf.exe", "application/pdf", exe), []string{
			"invoice.pdf.exe is a program", "two extensions: it is a .exe file, not a .pdf one",
			"declared as application/pdf but its content looks like application/vnd.microsoft.portable-executable"}},
		{"program declared as a document", att("report.pdf", "application/pdf", exe), []string{
			"report.pdf is a program", "declared as application/pdf but its content looks like"}},
		{"script", att("setup.ps1", "text/plain", []byte("Invoke-WebRequest http://x\n")), []string{"setup.ps1 is a program"}},
		{"name and type disagree", att("photo.png", "application/pdf", pdf), []string{"photo.png is named like image/png but declared as application/pdf"}},
		{"macros", att("budget.xlsm", "application/vnd.ms-excel.sheet.macroenabled.12", zip), []string{"budget.xlsm is a program, a script or a document with macros"}},
		{"office document is a zip", att("notes.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", zip), nil},
		{"csv is text", att("rows.csv", "text/csv", []byte("a,b\n1,2\n")), nil},
		{"octet-stream claims nothing", att("blob.bin", "application/octet-stream", pdf), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := prepare(t, a, withAttachments(c.att))
			if err != nil {
				t.Fatal(err)
			}
			got := attachmentWarnings(p.Preview)
			if len(got) != len(c.want) {
				t.Fatalf("warnings = %q, want %d matching %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

func TestAttachmentRefusals(t *testing.T) {
	a := newAction(t, mailer.NewDevMailbox(1), email.Limits{MaxAttachments: 2, MaxAttachmentBytes: 1000})
	big := bytes.Repeat([]byte("a"), 600)
	for _, c := range []struct {
		name, input string
		code        approval.Code
		field, rule string
	}{
		{"not base64", withAttachments(map[string]string{"name": "a.txt", "content_type": "text/plain", "content_base64": "!!"}),
			approval.CodeInvalidInput, "attachments[0].content_base64", ""},
		{"empty", withAttachments(att("a.txt", "text/plain", nil)), approval.CodeInvalidInput, "attachments[0].content_base64", ""},
		{"no name", withAttachments(att(" ", "text/plain", pdf)), approval.CodeInvalidInput, "attachments[0].name", ""},
		{"path in the name", withAttachments(att("../etc/passwd", "text/plain", pdf)), approval.CodeInvalidInput, "attachments[0].name", ""},
		{"encoded word in the name", withAttachments(att("=?utf-8?q?invoice.pdf?=", "application/pdf", pdf)), approval.CodeInvalidInput, "attachments[0].name", ""},
		{"reversed name", withAttachments(att("invoice\u202efdp.exe", "application/pdf", pdf)), approval.CodeInvalidInput, "attachments[0].name", ""},
		{"no type", withAttachments(att("a.pdf", "", pdf)), approval.CodeInvalidInput, "attachments[0].content_type", ""},
		{"multipart type", withAttachments(att("a.eml", "multipart/mixed; boundary=x", pdf)), approval.CodeInvalidInput, "attachments[0].content_type", ""},
		{"unknown field", `{"to":["ada@client.example"],"subject":"S","text":"t","attachments":[{"name":"a","content_type":"text/plain","content_base64":"YQ==","path":"/etc/passwd"}]}`,
			approval.CodeInvalidInput, "attachments", ""},
		{"same name twice", withAttachments(att("a.txt", "text/plain", pdf), att("A.TXT", "text/plain", pdf)), approval.CodeInvalidInput, "attachments[1].name", ""},
		{"too many", withAttachments(att("a.txt", "text/plain", pdf), att("b.txt", "text/plain", pdf), att("c.txt", "text/plain", pdf)),
			approval.CodePolicyDenied, "", "max_attachments"},
		{"too large", withAttachments(att("a.txt", "text/plain", big), att("b.txt", "text/plain", big)),
			approval.CodePolicyDenied, "", "max_attachment_bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := prepare(t, a, c.input)
			var e *approval.Error
			if !errors.As(err, &e) || e.Code != c.code {
				t.Fatalf("error = %v, want %s", err, c.code)
			}
			if c.rule != "" && e.Details["rule"] != c.rule {
				t.Errorf("rule = %v, want %s", e.Details["rule"], c.rule)
			}
			if c.field != "" && !strings.Contains(fmt.Sprint(e.Details["fields"]), c.field) {
				t.Errorf("fields = %v, want %s", e.Details["fields"], c.field)
			}
		})
	}
}

// What the SMTP server receives is what was approved: every attachment's
// name (non-ASCII included), content type and exact bytes.
func TestExecuteSendsAttachmentsAsApproved(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	a := newAction(t, smtpSender(t, srv), email.Limits{})
	binary := make([]byte, 3000)
	for i := range binary {
		binary[i] = byte(i * 7)
	}
	op, p := operation(t, a, withAttachments(
		att("Rechnung Dezember – 2026.pdf", "application/pdf", pdf),
		att("data.bin", "application/octet-stream", binary),
		att("notes.txt", "text/plain; charset=UTF-8", []byte("Grüße\r\nline two\n")),
	))
	if _, err := a.Execute(context.Background(), op); err != nil {
		t.Fatal(err)
	}
	msgs, err := srv.WaitFor(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := msgs[0].Parse()
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "Hi Ada,\nthe invoice is attached.\n" {
		t.Errorf("text = %q", got.Text)
	}
	approved := p.Input.(email.Input).Attachments
	if len(got.Attachments) != len(approved) {
		t.Fatalf("%d attachments arrived, %d approved", len(got.Attachments), len(approved))
	}
	for i, want := range approved {
		g := got.Attachments[i]
		sum := sha256.Sum256(g.Data)
		if g.Name != want.Name || g.ContentType != want.ContentType || hex.EncodeToString(sum[:]) != want.SHA256 || len(g.Data) != want.Size {
			t.Errorf("attachment %d arrived as %q %q %d bytes sha256 %x; approved %q %q %d bytes %s",
				i, g.Name, g.ContentType, len(g.Data), sum, want.Name, want.ContentType, want.Size, want.SHA256)
		}
	}
}

// A stored attachment that no longer matches its approved hash is not sent.
func TestExecuteRefusesAlteredAttachment(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	a := newAction(t, smtpSender(t, srv), email.Limits{})
	op, _ := operation(t, a, withAttachments(att("a.pdf", "application/pdf", pdf)))
	op.Input = bytes.Replace(op.Input, []byte(b64(pdf)), []byte(b64(append([]byte("X"), pdf[1:]...))), 1)
	_, err := a.Execute(context.Background(), op)
	var ee *approval.ExecError
	if !errors.As(err, &ee) || ee.OutcomeUnknown {
		t.Fatalf("err = %v, want a failure known to have sent nothing", err)
	}
	if n := len(srv.Messages()); n != 0 {
		t.Errorf("%d messages sent", n)
	}
}
