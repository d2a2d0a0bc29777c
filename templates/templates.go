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
)

//go:embed *.tmpl *.css
var files embed.FS

// Funcs are shared by text and HTML templates.
var Funcs = map[string]any{
	"time":  func(t time.Time) string { return t.UTC().Format("Mon 2 Jan 2006 15:04 MST") },
	"join":  strings.Join,
	"upper": strings.ToUpper,
}

// HTML parses every *.html.tmpl template; each is named by its file name.
func HTML() (*htmltemplate.Template, error) {
	return htmltemplate.New("").Funcs(Funcs).ParseFS(files, "*.html.tmpl")
}

// Text parses every *.txt.tmpl template; each is named by its file name.
func Text() (*texttemplate.Template, error) {
	return texttemplate.New("").Funcs(Funcs).ParseFS(files, "*.txt.tmpl")
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
