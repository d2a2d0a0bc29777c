package email

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/countersign/countersign/approval"
)

// Markup attachments open in a browser (or an image viewer that runs
// scripts): HTML, XHTML, SVG and XML, whatever the declared type says, by
// name, by declared type or by content.
var (
	markupExt  = map[string]bool{"svgz": true, "htm": true, "html": true, "xhtml": true, "xht": true, "shtml": true, "svg": true, "xml": true, "xsl": true, "xslt": true, "hta": true, "mht": true, "mhtml": true}
	markupType = map[string]bool{"text/html": true, "application/xhtml+xml": true, "image/svg+xml": true, "application/xml": true, "text/xml": true, "application/hta": true, "message/rfc822": true, "application/x-mimearchive": true}
)

// textOf is an attachment's content as text when it is text: UTF-8, or
// UTF-16 with a byte-order mark (decoded). ok is false for binary content.
func textOf(data []byte) (s string, ok bool) {
	switch {
	case bytes.HasPrefix(data, []byte{0xef, 0xbb, 0xbf}):
		data = data[3:]
	case len(data) >= 2 && (data[0] == 0xff && data[1] == 0xfe || data[0] == 0xfe && data[1] == 0xff):
		big := data[0] == 0xfe
		u := make([]uint16, 0, len(data)/2)
		for i := 2; i+1 < len(data); i += 2 {
			if big {
				u = append(u, uint16(data[i])<<8|uint16(data[i+1]))
			} else {
				u = append(u, uint16(data[i+1])<<8|uint16(data[i]))
			}
		}
		return string(utf16.Decode(u)), true
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return "", false
	}
	if utf8.Valid(data) {
		return string(data), true
	}
	// Text in a legacy 8-bit charset (Latin-1, Windows-1252): text if few
	// bytes are control characters.
	ctl := 0
	for _, b := range data {
		if b < 0x20 && b != '\n' && b != '\r' && b != '\t' && b != '\f' {
			ctl++
		}
	}
	if ctl*100 > len(data) {
		return "", false
	}
	return strings.ToValidUTF8(string(data), "\uFFFD"), true
}

// isMarkup reports whether a browser-like program would render the
// attachment: by name, declared type, or content.
func isMarkup(a Attachment, text string) bool {
	last, _ := ext(a.Name)
	declared, _, _ := mime.ParseMediaType(a.ContentType)
	if markupExt[last] || markupType[declared] || strings.HasSuffix(declared, "+xml") {
		return true
	}
	sniffed, _, _ := mime.ParseMediaType(http.DetectContentType([]byte(text)))
	if sniffed == "text/html" || sniffed == "text/xml" {
		return true
	}
	head := strings.ToLower(strings.TrimLeftFunc(text[:min(len(text), 1024)], unicode.IsSpace))
	return strings.HasPrefix(head, "<svg") || strings.HasPrefix(head, "<!doctype") || strings.HasPrefix(head, "<?xml")
}

// activeContent lists what in a markup document acts when it is opened:
// scripts, event handlers, script URLs, forms (which post what is typed
// elsewhere), frames, plugins, redirects and style sheets that run code.
// The document is tokenized as a browser reads it, so case, entities and
// SVG or XHTML namespaces change nothing.
func activeContent(text string) []string {
	var found []string
	note := func(s string) {
		if len(found) < 6 && !containsStr(found, s) {
			found = append(found, s)
		}
	}
	if strings.Contains(strings.ToLower(text), "<?xml-stylesheet") {
		note("an XML style sheet (XSLT can run scripts)")
	}
	z := html.NewTokenizer(strings.NewReader(text))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		name := strings.ToLower(tok.Data)
		if i := strings.LastIndexByte(name, ':'); i >= 0 {
			name = name[i+1:] // svg:script, html:form
		}
		switch name {
		case "script":
			note("a script")
		case "form":
			if to := attrValue(tok, "action"); to != "" {
				note("a form that sends what is typed to " + to)
			} else {
				note("a form")
			}
		case "iframe", "frame", "frameset", "object", "embed", "applet", "portal":
			note("an embedded <" + name + ">")
		case "foreignobject":
			note("HTML inside SVG (foreignObject)")
		case "meta":
			if strings.EqualFold(attrValue(tok, "http-equiv"), "refresh") {
				note("an automatic redirect (meta refresh)")
			}
		case "base":
			note("a <base> that redirects every link")
		case "input", "button", "textarea", "select":
			if attrValue(tok, "formaction") != "" {
				note("a form that sends what is typed to " + attrValue(tok, "formaction"))
			}
		case "set", "animate":
			if strings.Contains(strings.ToLower(attrValue(tok, "attributename")), "href") {
				note("an SVG animation that rewrites a link")
			}
		}
		for _, at := range tok.Attr {
			k := strings.ToLower(at.Key)
			switch {
			case strings.HasPrefix(k, "on") && len(k) > 2:
				note("an event handler (" + k + ")")
			case scriptURL(at.Val) && (k == "href" || k == "src" || k == "action" || k == "formaction" || k == "data" ||
				k == "xlink:href" || strings.HasSuffix(k, ":href") || k == "values" || k == "to" || k == "from"):
				note("a script link (" + k + "=javascript:…)")
			}
		}
	}
	return found
}

// scriptURL reports whether a URL runs script when followed, as a
// browser reads it (blanks and control characters inside the scheme are
// ignored).
func scriptURL(u string) bool {
	u = strings.ToLower(strings.Map(func(r rune) rune {
		if r <= ' ' || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, u))
	return strings.HasPrefix(u, "javascript:") || strings.HasPrefix(u, "vbscript:") || strings.HasPrefix(u, "data:text/html") ||
		strings.HasPrefix(u, "data:image/svg") || strings.HasPrefix(u, "data:application/xhtml")
}

func attrValue(t html.Token, key string) string {
	for _, a := range t.Attr {
		k := strings.ToLower(a.Key)
		if i := strings.LastIndexByte(k, ':'); i >= 0 && !strings.HasPrefix(k, "xlink:") {
			k = k[i+1:]
		}
		if k == key {
			return strings.TrimSpace(a.Val)
		}
	}
	return ""
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// MaxShownAttachmentBytes bounds the content of one text-like attachment
// shown to the approver.
const MaxShownAttachmentBytes = 64 << 10

// shownAttachment is the content of a text-like attachment as the approver
// reads it (the source, never rendered), cut at MaxShownAttachmentBytes;
// ok is false for binary content. Hidden characters are escaped by the
// renderer like any preview text (guarantee 11).
func shownAttachment(i int, a Attachment) (approval.Field, bool) {
	data, err := a.decoded()
	if err != nil {
		return approval.Field{}, false
	}
	declared, _, _ := mime.ParseMediaType(a.ContentType)
	last, _ := ext(a.Name)
	if !textLike(declared, last) {
		sniffed, _ := sniff(data)
		if sniffed != "text/plain" && sniffed != "text/html" && sniffed != "text/xml" {
			return approval.Field{}, false
		}
	}
	text, ok := textOf(data)
	if _, params, err := mime.ParseMediaType(a.ContentType); err == nil && ok {
		// Decoded by the declared charset, as the recipient's program does.
		if cs := params["charset"]; cs != "" && cs != "utf-8" && cs != "us-ascii" && !strings.HasPrefix(cs, "utf-16") {
			if enc := legacyCharset(cs); enc != nil {
				if d, err := enc.NewDecoder().Bytes(data); err == nil {
					text = string(d)
				}
			}
		}
	}
	if !ok {
		return approval.Field{}, false
	}
	text = strings.ReplaceAll(text, "\r\n", "\n")
	label := fmt.Sprintf("Attachment %d content (%s, shown as text, not opened)", i+1, a.Name)
	if len(text) > MaxShownAttachmentBytes {
		cut := MaxShownAttachmentBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
		label = fmt.Sprintf("Attachment %d content (%s, shown as text, not opened; cut at %d of %d bytes: the rest is not shown)",
			i+1, a.Name, cut, a.Size)
	}
	return approval.Field{Name: fmt.Sprintf("attachments[%d].content", i), Label: label, Value: text, Long: true}, true
}

// textLike reports whether a declared type or extension names text.
func textLike(declared, last string) bool {
	switch {
	case strings.HasPrefix(declared, "text/"), strings.HasSuffix(declared, "+json"), strings.HasSuffix(declared, "+xml"),
		declared == "application/json", declared == "application/xml", declared == "application/csv",
		declared == "application/javascript", declared == "application/x-sh", declared == "application/hta",
		declared == "application/xhtml+xml", declared == "image/svg+xml", declared == "application/x-yaml", declared == "application/yaml":
		return true
	}
	switch last {
	case "txt", "csv", "tsv", "json", "xml", "htm", "html", "xhtml", "svg", "md", "ics", "vcf", "yaml", "yml", "js", "hta",
		"sh", "ps1", "bat", "cmd", "vbs", "log", "ini", "conf", "eml":
		return true
	}
	return false
}

// pdfName is a PDF name token (/JavaScript, or escaped /J#61vaScript).
var pdfName = regexp.MustCompile(`/[A-Za-z0-9#]+`)

// pdfActive lists what in a PDF acts when it is opened: scripts, launched
// programs, forms that submit, embedded files. Names inside compressed
// object streams are not read (a PDF can hide them there); this catches
// the plain ones, escaped names included.
func pdfActive(data []byte) []string {
	var found []string
	what := map[string]string{"/JavaScript": "a script", "/JS": "a script", "/Launch": "an action that launches a program",
		"/SubmitForm": "a form that sends what is typed elsewhere", "/EmbeddedFile": "an embedded file",
		"/RichMedia": "embedded media that can run code", "/XFA": "an XFA form (can run scripts)", "/ImportData": "an action that imports data"}
	for _, m := range pdfName.FindAll(data, -1) {
		name := string(m)
		if strings.Contains(name, "#") {
			name = unescapePDFName(name)
		}
		if w, ok := what[name]; ok && !containsStr(found, w) {
			found = append(found, w)
			if len(found) >= 4 {
				break
			}
		}
	}
	return found
}

func unescapePDFName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '#' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// knownCharset reports whether cs is a charset whose bytes every mail
// program and this preview decode alike.
func knownCharset(cs string) bool {
	switch cs {
	case "utf-8", "us-ascii", "utf-16", "utf-16le", "utf-16be":
		return true
	}
	return legacyCharset(cs) != nil
}

// gunzipBounded decompresses at most 1 MiB of a gzip file (what is past
// it is not read), or returns nil.
func gunzipBounded(data []byte) []byte {
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	out, _ := io.ReadAll(io.LimitReader(r, 1<<20))
	return out
}
