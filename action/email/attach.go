package email

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/approval"
)

// Attachment limits. The configured ones (limits: email.send:
// max_attachments, max_attachment_bytes) default to the first two and may
// not pass the hard ones. The request body limit of the REST API (256 KiB
// by default) and of /mcp (1 MiB) bound attachments first: base64 makes a
// file a third larger on the wire.
const (
	DefaultMaxAttachments     = 5
	DefaultMaxAttachmentBytes = 5 << 20 // decoded, all attachments together
	HardMaxAttachments        = 20
	HardMaxAttachmentBytes    = 20 << 20
	maxAttachmentName         = 255 // bytes
)

// Attachment is one file of an email, normalized: its content is the
// exact bytes sent (standard base64), and Size and SHA256 say which bytes
// the approver approved (they are in the payload hash with the content).
type Attachment struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
	SHA256      string `json:"sha256"`
	Content     string `json:"content_base64"`
}

// rawAttachment is an attachment as the agent sends it.
type rawAttachment struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Content     string `json:"content_base64"`
}

// attachLimits bound the attachments of one email.
type attachLimits struct{ count, bytes int }

// normalizeAttachments checks and normalizes the agent's attachments. The
// total size is checked by checkPolicy (a policy limit).
func normalizeAttachments(raws []rawAttachment, fe *approval.FieldErrors) []Attachment {
	var out []Attachment
	seen := map[string]string{}
	for i, r := range raws {
		field := fmt.Sprintf("attachments[%d]", i)
		n0 := len(*fe)
		name := strings.TrimSpace(r.Name)
		if why := badName(name); why != "" {
			fe.Add(field+".name", "%s", why)
		} else if first, dup := seen[strings.ToLower(name)]; dup {
			fe.Add(field+".name", "%s is already attached (%s)", name, first)
		} else {
			seen[strings.ToLower(name)] = field
		}
		ct, why := normalizeContentType(r.ContentType)
		if why != "" {
			fe.Add(field+".content_type", "%s", why)
		}
		data, err := base64.StdEncoding.DecodeString(strings.Map(dropSpace, r.Content))
		switch {
		case err != nil:
			fe.Add(field+".content_base64", "is not standard base64 (RFC 4648 §4, with padding)")
		case len(data) == 0:
			fe.Add(field+".content_base64", "is empty; attach a file with content")
		}
		if len(*fe) > n0 {
			continue
		}
		sum := sha256.Sum256(data)
		out = append(out, Attachment{Name: name, ContentType: ct, Size: len(data), SHA256: hex.EncodeToString(sum[:]),
			Content: base64.StdEncoding.EncodeToString(data)})
	}
	return out
}

// dropSpace removes the line breaks and spaces that wrapped base64 carries.
func dropSpace(r rune) rune {
	if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
		return -1
	}
	return r
}

// badName says why a file name cannot be sent exactly as approved, or "".
// The mail writer replaces " / : < > ? \ | and control characters, and a
// recipient decodes "=?…?=" as an encoded word: such names would arrive
// other than the approver read them.
func badName(name string) string {
	switch {
	case name == "":
		return "is required (the file name the recipient sees)"
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	case len(name) > maxAttachmentName:
		return fmt.Sprintf("is longer than %d bytes", maxAttachmentName)
	case name == "." || name == ".." || strings.HasPrefix(name, "."):
		return "must not start with a dot"
	case strings.ContainsAny(name, `"/:<>?\|`):
		return `must not contain any of " / : < > ? \ |`
	case strings.Contains(name, "=?") || encodedWord(name):
		return `must not contain "=?" (mail programs would decode it)`
	case strings.Contains(name, "*=") || strings.Contains(name, ";"):
		// RFC 2231 parameter syntax (filename*=utf-8''…): a lenient
		// parser reads a second, other name out of it.
		return `must not contain ";" or "*=" (header parameter syntax that mail programs may read as another name)`
	case strings.HasSuffix(name, "."):
		// Windows drops trailing dots when it saves a file: "invoice.exe."
		// would be saved, and run, as invoice.exe.
		return "must not end with a dot (the recipient's system would drop it and change the file's type)"
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0:
		return "must not contain control, invisible or direction-changing characters"
	}
	return ""
}

// normalizeContentType is the declared media type, lowercased, with at
// most a charset parameter.
func normalizeContentType(s string) (string, string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", "is required (a media type such as application/pdf)"
	}
	mt, params, err := mime.ParseMediaType(s)
	if err != nil || !strings.Contains(mt, "/") || strings.HasPrefix(mt, "multipart/") || strings.HasPrefix(mt, "message/") {
		return "", fmt.Sprintf("%q is not a media type for a file, such as application/pdf", s)
	}
	for k := range params {
		if k != "charset" {
			return "", fmt.Sprintf("only a charset parameter is accepted, not %q", k)
		}
	}
	if cs, ok := params["charset"]; ok {
		cs = strings.ToLower(strings.TrimSpace(cs))
		// The recipient decodes the bytes by this charset, and the approver
		// reads them decoded by it too (shownAttachment): only charsets
		// both read alike. UTF-7 and the like would show one text here
		// and another there ("+ADw-script+AD4-" is "<script>").
		if !knownCharset(cs) {
			return "", fmt.Sprintf("charset %q is not accepted; use utf-8 (or us-ascii, iso-8859-*, windows-125*, utf-16)", cs)
		}
		return mime.FormatMediaType(mt, map[string]string{"charset": cs}), ""
	}
	return mt, ""
}

// decoded returns the attachment's bytes (stored input is valid base64).
func (a Attachment) decoded() ([]byte, error) { return base64.StdEncoding.DecodeString(a.Content) }

// Executables: names, declared types and contents that run code when
// opened, or documents that can carry macros.
var (
	executableExt = map[string]bool{
		"exe": true, "com": true, "scr": true, "pif": true, "bat": true, "cmd": true, "msi": true, "msp": true,
		"cpl": true, "dll": true, "jar": true, "js": true, "jse": true, "vbs": true, "vbe": true, "wsf": true,
		"wsh": true, "hta": true, "ps1": true, "psm1": true, "sh": true, "bash": true, "command": true, "app": true,
		"apk": true, "dmg": true, "pkg": true, "deb": true, "rpm": true, "lnk": true, "reg": true, "iso": true,
		"img": true, "vhd": true, "appimage": true, "run": true, "elf": true, "so": true, "dylib": true,
		"docm": true, "xlsm": true, "pptm": true, "dotm": true, "xltm": true, "xlam": true, "one": true,
		// Shortcuts, help files and installers that run or fetch code when opened.
		"chm": true, "url": true, "website": true, "webloc": true, "desktop": true, "scf": true, "inf": true, "sct": true,
		"wsc": true, "xll": true, "vhdx": true, "msix": true, "appx": true, "application": true, "cab": true,
		"settingcontent-ms": true, "library-ms": true, "search-ms": true, "jnlp": true, "pyw": true,
	}
	executableType = map[string]bool{
		"application/x-msdownload": true, "application/x-msdos-program": true, "application/x-executable": true,
		"application/vnd.microsoft.portable-executable": true, "application/x-sh": true, "application/x-csh": true,
		"application/x-bat": true, "application/java-archive": true, "application/x-ms-installer": true,
		"application/x-msi": true, "application/javascript": true, "text/javascript": true, "application/x-elf": true,
		"application/x-mach-binary": true, "application/vnd.android.package-archive": true, "application/hta": true,
		"application/vnd.ms-word.document.macroenabled.12": true, "application/vnd.ms-excel.sheet.macroenabled.12": true,
	}
	// extType is the media type a name's extension announces.
	extType = map[string]string{
		"pdf": "application/pdf", "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
		"webp": "image/webp", "svg": "image/svg+xml", "txt": "text/plain", "csv": "text/csv", "htm": "text/html",
		"html": "text/html", "json": "application/json", "xml": "application/xml", "ics": "text/calendar",
		"zip": "application/zip", "gz": "application/gzip",
		"doc": "application/msword", "xls": "application/vnd.ms-excel", "ppt": "application/vnd.ms-powerpoint",
		"docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		"xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
		"pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
		"odt":  "application/vnd.oasis.opendocument.text", "ods": "application/vnd.oasis.opendocument.spreadsheet",
	}
)

// ext is the lowercased last extension of a name, and the one before it.
func ext(name string) (last, inner string) {
	parts := strings.Split(strings.ToLower(name), ".")
	if len(parts) > 1 {
		last = parts[len(parts)-1]
	}
	if len(parts) > 2 {
		inner = parts[len(parts)-2]
	}
	return last, inner
}

// sniff is what the content is, from its first bytes: a media type, and
// whether it is a program.
func sniff(data []byte) (mediaType string, program bool) {
	switch {
	case bytes.HasPrefix(data, []byte("MZ")):
		return "application/vnd.microsoft.portable-executable", true
	case bytes.HasPrefix(data, []byte("\x7fELF")):
		return "application/x-elf", true
	case bytes.HasPrefix(data, []byte{0xcf, 0xfa, 0xed, 0xfe}), bytes.HasPrefix(data, []byte{0xce, 0xfa, 0xed, 0xfe}),
		bytes.HasPrefix(data, []byte{0xca, 0xfe, 0xba, 0xbe}):
		return "application/x-mach-binary", true
	case bytes.HasPrefix(data, []byte("#!")):
		return "text/x-script", true
	}
	mt, _, _ := mime.ParseMediaType(http.DetectContentType(data))
	return mt, false
}

// compatible reports whether content sniffed as sniffed may honestly be
// declared as declared.
func compatible(declared, sniffed string) bool {
	d, _, _ := mime.ParseMediaType(declared)
	switch {
	case sniffed == "" || sniffed == "application/octet-stream" || d == "application/octet-stream" || d == sniffed:
		return true
	case sniffed == "text/plain":
		// Plain text is anything textual: CSV, JSON, calendars, Markdown…
		return strings.HasPrefix(d, "text/") || strings.HasSuffix(d, "+json") || strings.HasSuffix(d, "+xml") ||
			d == "application/json" || d == "application/xml" || d == "application/csv" || d == "application/javascript"
	case sniffed == "application/zip":
		// Office documents, ODF, EPUB and Java archives are zip files.
		return strings.HasPrefix(d, "application/vnd.openxmlformats") || strings.HasPrefix(d, "application/vnd.oasis.opendocument") ||
			strings.HasSuffix(d, "+zip") || strings.HasSuffix(d, ".macroenabled.12") ||
			d == "application/java-archive" || d == "application/vnd.android.package-archive"
	case sniffed == "text/xml":
		return d == "application/xml" || strings.HasSuffix(d, "+xml")
	case sniffed == "application/x-gzip":
		return d == "application/gzip"
	}
	return false
}

// warning is one warning of the preview with its stable code.
type warning struct{ code, msg string }

// Stable codes of email.send's own warnings (SPEC §6).
const (
	warnBcc              = "bcc_recipients"
	warnExternal         = "external_recipients"
	warnExternalReplyTo  = "external_reply_to"
	warnNameLikeAddress  = "display_name_address"
	warnIDN              = "idn_domain"
	warnDoubleExtension  = "double_extension"
	warnNameTypeMismatch = "attachment_name_type_mismatch"
	warnContentMismatch  = "attachment_content_mismatch"
)

// attachmentWarnings flag what deserves a second look before approving:
// programs, active documents (scripts, forms), two extensions, and a
// declared type the name or content contradicts. Names are agent text:
// the renderer escapes them.
func attachmentWarnings(as []Attachment) []warning {
	var w []warning
	for _, a := range as {
		data, _ := a.decoded()
		last, inner := ext(a.Name)
		sniffed, program := sniff(data)
		declared, _, _ := mime.ParseMediaType(a.ContentType)
		switch {
		case executableExt[last] || executableType[declared] || program:
			w = append(w, warning{approval.WarnActiveAttachment, fmt.Sprintf("Attachment %s is a program, a script or a document with macros: opening it can run code on the recipient's computer.", a.Name)})
		default:
			// Readers find a PDF header within the first KiB; a file can be
			// a PDF and a web document at once, so both are read.
			if bytes.Contains(data[:min(len(data), 1024)], []byte("%PDF-")) {
				if found := pdfActive(data); len(found) > 0 {
					w = append(w, warning{approval.WarnActiveAttachment, fmt.Sprintf("Attachment %s is a PDF that acts when opened: it holds %s.",
						a.Name, strings.Join(found, ", "))})
				}
			}
			markup := data
			if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) && (last == "svgz" || markupExt[last] || markupType[declared]) {
				markup = gunzipBounded(data) // an SVG viewer opens .svgz compressed
			}
			if text, ok := textOf(markup); ok && isMarkup(a, text) {
				if found := activeContent(text); len(found) > 0 {
					w = append(w, warning{approval.WarnActiveAttachment, fmt.Sprintf("Attachment %s is a web document that acts when opened in a browser: it holds %s. "+
						"Its source is shown below; it is sent as is.", a.Name, strings.Join(found, ", "))})
				}
			}
		}
		if inner != "" && extType[inner] != "" && last != inner && (executableExt[last] || extType[last] == "") {
			w = append(w, warning{warnDoubleExtension, fmt.Sprintf("Attachment %s has two extensions: it is a .%s file, not a .%s one, though many programs show only the first.", a.Name, last, inner)})
		}
		if want := extType[last]; want != "" && !compatible(declared, want) && !compatible(want, declared) {
			w = append(w, warning{warnNameTypeMismatch, fmt.Sprintf("Attachment %s is named like %s but declared as %s.", a.Name, want, a.ContentType)})
		}
		if !compatible(a.ContentType, sniffed) {
			w = append(w, warning{warnContentMismatch, fmt.Sprintf("Attachment %s is declared as %s but its content looks like %s.", a.Name, a.ContentType, sniffed)})
		}
	}
	return w
}

// attachmentField shows one attachment: name, type, size and the start of
// its SHA-256 (the whole hash is in the input).
func attachmentField(i int, a Attachment) approval.Field {
	return approval.Field{Name: fmt.Sprintf("attachments[%d]", i), Label: fmt.Sprintf("Attachment %d", i+1),
		Value: fmt.Sprintf("%s · %s · %s · SHA-256 %s…", a.Name, a.ContentType, humanSize(a.Size), a.SHA256[:16])}
}

func humanSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/1024, n)
	}
	return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
}

// attachmentBytes is the decoded size of all attachments.
func attachmentBytes(as []Attachment) int {
	n := 0
	for _, a := range as {
		n += a.Size
	}
	return n
}
