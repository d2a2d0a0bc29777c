package smtptest_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name                string
		raw                 string
		subject, text, html string
		parts               int
	}{
		{
			name:    "plain 7bit",
			raw:     "Subject: hello\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nline 1\r\nline 2\r\n",
			subject: "hello", text: "line 1\nline 2\n", parts: 1,
		},
		{
			name:    "no content type",
			raw:     "Subject: hello\r\n\r\nbody\r\n",
			subject: "hello", text: "body\n", parts: 1,
		},
		{
			name: "encoded subject and quoted-printable",
			raw: "Subject: =?UTF-8?q?Gr=C3=BC=C3=9Fe?=\r\nContent-Type: text/plain; charset=UTF-8\r\n" +
				"Content-Transfer-Encoding: quoted-printable\r\n\r\nGr=C3=BC=C3=9Fe, a long line that is sof=\r\nt broken=3D\r\n",
			subject: "Grüße", text: "Grüße, a long line that is soft broken=\n", parts: 1,
		},
		{
			name: "base64 html",
			raw: "Subject: b\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
				"PHA+aGk8\r\nL3A+\r\n",
			subject: "b", html: "<p>hi</p>", parts: 1,
		},
		{
			name: "multipart alternative",
			raw: "Subject: m\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=XX\r\n\r\n" +
				"--XX\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nplain =E2=9C=93\r\n" +
				"--XX\r\nContent-Type: text/html; charset=UTF-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<b>html</b>=\r\n\r\n" +
				"--XX--\r\n",
			subject: "m", text: "plain ✓", html: "<b>html</b>", parts: 2,
		},
		{
			name: "nested mixed",
			raw: "Subject: n\r\nContent-Type: multipart/mixed; boundary=OUT\r\n\r\n" +
				"--OUT\r\nContent-Type: multipart/alternative; boundary=IN\r\n\r\n" +
				"--IN\r\nContent-Type: text/plain\r\n\r\nt\r\n--IN\r\nContent-Type: text/html\r\n\r\nh\r\n--IN--\r\n" +
				"--OUT\r\nContent-Type: application/octet-stream\r\n\r\nxyz\r\n--OUT--\r\n",
			subject: "n", text: "t", html: "h", parts: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := smtptest.Parse([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := p.Subject, tt.subject; got != want {
				t.Errorf("Subject = %q, want %q", got, want)
			}
			if got, want := p.Text, tt.text; got != want {
				t.Errorf("Text = %q, want %q", got, want)
			}
			if got, want := p.HTML, tt.html; got != want {
				t.Errorf("HTML = %q, want %q", got, want)
			}
			if got, want := p.Parts, tt.parts; got != want {
				t.Errorf("Parts = %d, want %d", got, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, raw string }{
		{"no header end", "Subject"},
		{"bad charset", "Content-Type: text/plain; charset=iso-2022-jp\r\n\r\nx"},
		{"bad encoding", "Content-Transfer-Encoding: uuencode\r\n\r\nx"},
		{"bad media type", "Content-Type: ;;\r\n\r\nx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := smtptest.Parse([]byte(tt.raw)); err == nil {
				t.Errorf("Parse(%q) succeeded, want an error", tt.raw)
			}
		})
	}
}

func TestParsedAddresses(t *testing.T) {
	p, err := smtptest.Parse([]byte("From: =?utf-8?q?J=C3=B6rg?= <j@x.example>\r\nTo: a@x.example, \"B, C\" <b@x.example>\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	from, err := p.Addresses("From")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := from[0].Name, "Jörg"; got != want {
		t.Errorf("From name = %q, want %q", got, want)
	}
	to, err := p.Addresses("To")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, a := range to {
		addrs = append(addrs, a.Name+"|"+a.Address)
	}
	if got, want := strings.Join(addrs, ","), "|a@x.example,B, C|b@x.example"; got != want {
		t.Errorf("To = %q, want %q", got, want)
	}
	cc, err := p.Addresses("Cc")
	if err != nil || cc != nil {
		t.Errorf("Cc = %v, %v; want nil, nil", cc, err)
	}
}
