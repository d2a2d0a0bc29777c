// Package templates holds the embedded HTML and text templates of emails
// and pages. They are parsed once at start-up; a missing or broken template
// fails the start, not a request.
package templates

import (
	"embed"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/countersign/countersign/approval"
)

//go:embed *.tmpl *.css *.js
var files embed.FS

// Funcs are shared by text and HTML templates.
var Funcs = map[string]any{
	"time":  func(t time.Time) string { return t.UTC().Format("Mon 2 Jan 2006 15:04 MST") },
	"join":  strings.Join,
	"upper": strings.ToUpper,
	// frameHeight sizes the frame of an HTML part from its estimated
	// lines, generously, so that it shows whole without a script.
	"frameHeight": func(lines int) int { return 32 + 26*max(lines, 2) },
	// via says in plain words how a decision was made.
	"via": approval.ViaWords,
}

// HTML parses every *.html.tmpl template; each is named by its file name.
func HTML() (*htmltemplate.Template, error) {
	return htmltemplate.New("").Funcs(Funcs).ParseFS(files, "*.html.tmpl")
}

// Text parses every *.txt.tmpl template; each is named by its file name.
func Text() (*texttemplate.Template, error) {
	return texttemplate.New("").Funcs(Funcs).ParseFS(files, "*.txt.tmpl")
}

// Script is the pages' one script (passkeys: WebAuthn needs JavaScript),
// served from /static and allowed by a CSP nonce. Only pages that need a
// passkey load it; every other page has no script.
func Script() []byte {
	b, err := files.ReadFile("countersign.js")
	if err != nil {
		panic(err)
	}
	return b
}

// Stylesheet is the CSS of the pages, served from /static so that the
// Content-Security-Policy can forbid inline styles and scripts.
func Stylesheet() []byte {
	b, err := files.ReadFile("countersign.css")
	if err != nil {
		panic(err)
	}
	return b
}
