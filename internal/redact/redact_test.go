package redact_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/redact"
	"github.com/countersign/countersign/internal/testing/testkit"
)

type stringer struct{ s string }

func (s stringer) String() string { return s.s }

type withLink struct {
	URL  string
	Note string
}

// TestHandlerRedactsLinks: a real signed link, logged every way a log line
// can carry it, never reaches the output; the same lines through a plain
// handler do leak, so the scan is able to fail.
func TestHandlerRedactsLinks(t *testing.T) {
	k := approval.RandomKeyring()
	c := approval.NewLinkClaims("op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "grace", "email", time.Now().Add(time.Hour))
	token := k.Sign(c, "sha256:00")
	link := "https://approvals.example/a/" + token
	secrets := testkit.LinkSecrets(link)

	logAll := func(log *slog.Logger) {
		log.Error("store unavailable", "path", "/a/"+token, "err", errors.New("redis: GET "+token+": i/o timeout"))
		log.Info("opened " + link)
		log.Warn("link", slog.Group("req", "url", link, "ua", "mail scanner"), "value", stringer{"see " + link})
		log.With("link", link).WithGroup("g").Info("with attrs", "struct", withLink{URL: link, Note: "x"})
		log.Error("panic", "value", fmt.Sprintf("%v", []string{token}), "encoded", "%2Fa%2F"+token)
		log.Info("claims only", "c", strings.Split(token, ".")[1]+"."+strings.Split(token, ".")[2])
	}
	var clean, raw bytes.Buffer
	logAll(redact.New(slog.NewJSONHandler(&clean, nil)))
	logAll(slog.New(slog.NewJSONHandler(&raw, nil)))

	testkit.AssertNoLinkSecrets(t, secrets, map[string]string{"log": clean.String()})
	if found := testkit.FindLinkSecrets(secrets, map[string]string{"log": raw.String()}); len(found) == 0 {
		t.Fatal("the unredacted log shows no secret: the test proves nothing")
	}
	for _, want := range []string{`"path":"/a/…redacted"`, "redis: GET …redacted: i/o timeout", `"ua":"mail scanner"`, "Note:x"} {
		if !strings.Contains(clean.String(), want) {
			t.Errorf("redacted log lacks %q:\n%s", want, clean.String())
		}
	}
}

func TestStringLeavesOrdinaryTextAlone(t *testing.T) {
	for _, s := range []string{
		"countersign serving", "listen 127.0.0.1:8080", "/v1/operations/op_aaaaaaaaaaaaaaaaaaaaaaaaaa/send",
		"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "https://calendar.internal.example/api/events/42",
		"github.com/countersign/countersign/web.(*Server).openLink", "/static/countersign.css",
	} {
		if got := redact.String(s); got != s {
			t.Errorf("String(%q) = %q", s, got)
		}
	}
}
