package mailer_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/channel/email/mailer"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url      string
		host     string
		port     int
		user     string
		pass     string
		tls      mailer.TLSMode
		from     string
		auth     string
		insecure bool
		timeout  time.Duration
	}{
		{url: "smtp://mail.example.com", host: "mail.example.com", port: 587, tls: mailer.TLSMandatory,
			from: `"countersign" <countersign@mail.example.com>`, auth: "plain", timeout: 30 * time.Second},
		{url: "smtp://u:p@Mail.Example.com:2525", host: "Mail.Example.com", port: 2525, user: "u", pass: "p",
			tls: mailer.TLSMandatory, from: `"countersign" <countersign@mail.example.com>`, auth: "plain", timeout: 30 * time.Second},
		{url: "smtp://localhost:1025", host: "localhost", port: 1025, tls: mailer.TLSOpportunistic,
			from: `"countersign" <countersign@localhost>`, auth: "plain", timeout: 30 * time.Second},
		{url: "smtp://127.0.0.1:1025", host: "127.0.0.1", port: 1025, tls: mailer.TLSOpportunistic,
			from: `"countersign" <countersign@localhost>`, auth: "plain", timeout: 30 * time.Second},
		{url: "smtp://[::1]:25", host: "::1", port: 25, tls: mailer.TLSOpportunistic,
			from: `"countersign" <countersign@localhost>`, auth: "plain", timeout: 30 * time.Second},
		{url: "smtp://u:p@127.0.0.1:25?tls=none", host: "127.0.0.1", port: 25, user: "u", pass: "p", tls: mailer.TLSNone,
			from: `"countersign" <countersign@localhost>`, auth: "plain", timeout: 30 * time.Second},
		{url: "smtp://mail.example.com?tls=opportunistic", host: "mail.example.com", port: 587, tls: mailer.TLSOpportunistic,
			from: `"countersign" <countersign@mail.example.com>`, auth: "plain", timeout: 30 * time.Second},
		{url: "smtp://localhost?tls=mandatory", host: "localhost", port: 587, tls: mailer.TLSMandatory,
			from: `"countersign" <countersign@localhost>`, auth: "plain", timeout: 30 * time.Second},
		{url: "smtps://user%40example.com:p%40ss%3Aw%2Frd@smtp.example.com", host: "smtp.example.com", port: 465,
			user: "user@example.com", pass: "p@ss:w/rd", tls: mailer.TLSImplicit,
			from: `"countersign" <countersign@smtp.example.com>`, auth: "plain", timeout: 30 * time.Second},
		{url: "smtp://mx.example.com?from=" + "Approvals%20%3Capprovals%40example.com%3E&auth=LOGIN&timeout=5s&insecure_skip_verify=true",
			host: "mx.example.com", port: 587, tls: mailer.TLSMandatory, from: `"Approvals" <approvals@example.com>`,
			auth: "login", insecure: true, timeout: 5 * time.Second},
		{url: "smtp://mx.example.com/?from=bot@example.com", host: "mx.example.com", port: 587, tls: mailer.TLSMandatory,
			from: "<bot@example.com>", auth: "plain", timeout: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := mailer.ParseURL(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := c.Host, tt.host; got != want {
				t.Errorf("Host = %q, want %q", got, want)
			}
			if got, want := c.Port, tt.port; got != want {
				t.Errorf("Port = %d, want %d", got, want)
			}
			if got, want := c.Username, tt.user; got != want {
				t.Errorf("Username = %q, want %q", got, want)
			}
			if got, want := c.Password, tt.pass; got != want {
				t.Errorf("Password = %q, want %q", got, want)
			}
			if got, want := c.TLS, tt.tls; got != want {
				t.Errorf("TLS = %q, want %q", got, want)
			}
			if got, want := c.From.String(), tt.from; got != want {
				t.Errorf("From = %q, want %q", got, want)
			}
			if got, want := c.Auth, tt.auth; got != want {
				t.Errorf("Auth = %q, want %q", got, want)
			}
			if got, want := c.InsecureSkipVerify, tt.insecure; got != want {
				t.Errorf("InsecureSkipVerify = %v, want %v", got, want)
			}
			if got, want := c.Timeout, tt.timeout; got != want {
				t.Errorf("Timeout = %v, want %v", got, want)
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	const secret = "hunter2-SECRET"
	tests := []struct{ name, url, want string }{
		{"scheme", "http://u:" + secret + "@host", "scheme"},
		{"no host", "smtp://u:" + secret + "@:25", "host"},
		{"bad port", "smtp://u:" + secret + "@host:99999", "port"},
		{"non-numeric port", "smtp://u:" + secret + "@host:abc", "port"},
		{"bad tls", "smtp://u:" + secret + "@host?tls=sometimes", "tls"},
		{"tls with smtps", "smtps://u:" + secret + "@host?tls=none", "smtps"},
		{"unknown param", "smtp://u:" + secret + "@host?tsl=none", "unknown parameter"},
		{"repeated param", "smtp://host?tls=none&tls=mandatory", "2 times"},
		{"bad from", "smtp://u:" + secret + "@host?from=not-an-address", "from"},
		{"bad auth", "smtp://u:" + secret + "@host?auth=cram-md5", "auth"},
		{"bad timeout", "smtp://u:" + secret + "@host?timeout=-1s", "timeout"},
		{"bad insecure", "smtp://u:" + secret + "@host?insecure_skip_verify=yes please", "insecure_skip_verify"},
		{"credentials in clear", "smtp://u:" + secret + "@mail.example.com?tls=none", "without TLS"},
		{"password without user", "smtp://:" + secret + "@host", "user name"},
		{"path", "smtp://u:" + secret + "@host/inbox", "no path"},
		{"unparsable", "smtp://u:" + secret + "@host:port:x\x7f", "SMTP URL"},
		{"control char", "smtp://u:" + secret + "\n@host", "SMTP URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mailer.ParseURL(tt.url)
			if err == nil {
				t.Fatalf("ParseURL(%q) succeeded, want an error", tt.url)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q contains the password", err)
			}
		})
	}
}

func TestConfigNeverPrintsPassword(t *testing.T) {
	const secret = "hunter2-SECRET"
	c, err := mailer.ParseURL("smtps://me:" + secret + "@smtp.example.com:465?from=bot%40example.com")
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("smtp", "config", c)
	for _, s := range []string{c.String(), fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), logged.String()} {
		if strings.Contains(s, secret) {
			t.Errorf("%q contains the password", s)
		}
	}
	if got, want := c.String(), "smtps://me:REDACTED@smtp.example.com:465?from=%3Cbot%40example.com%3E"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	// The redacted form parses back to the same settings, password aside.
	back, err := mailer.ParseURL(c.String())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := back.Addr()+" "+string(back.TLS)+" "+back.From.Address, c.Addr()+" "+string(c.TLS)+" "+c.From.Address; got != want {
		t.Errorf("round trip = %q, want %q", got, want)
	}
}
