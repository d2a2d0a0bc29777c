package email

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/approval"
)

// Input limits that hold whatever the configuration says.
const (
	MaxSubjectChars   = 998       // RFC 5322 line limit, counted in characters
	MaxBodyBytes      = 200 << 10 // text and html together
	HardMaxRecipients = 100       // hard ceiling; Limits.MaxRecipients is usually lower
	maxAddressBytes   = 320       // a raw address string, display name included
	maxLocalBytes     = 64        // RFC 5321
)

// Input is the normalized input of email.send: what the human approves,
// what is hashed, and exactly what Execute sends. Addresses are
// structured so that display names never need quoting rules.
type Input struct {
	From    Address   `json:"from"`
	To      []Address `json:"to,omitempty"`
	Cc      []Address `json:"cc,omitempty"`
	Bcc     []Address `json:"bcc,omitempty"`
	ReplyTo *Address  `json:"reply_to,omitempty"`
	Subject string    `json:"subject"`
	// Text and HTML use "\n" line ends and end with one.
	Text string `json:"text"`
	HTML string `json:"html,omitempty"`
	// Attachments are sent in this order, exactly as stored.
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Address is one normalized address: the display name as given (trimmed)
// and local@domain with the domain lowercased and in ASCII (punycode).
type Address struct {
	Name    string `json:"name,omitempty"`
	Address string `json:"address"`
}

// String shows the address in its wire form, the way it is written in
// the message's header (display names decoded): Name <a@b.example>, the
// name quoted when it holds specials, a local part quoted when it is not
// a plain dot-atom (prepare accepts none of those, but a stored one is
// shown as the server would see it: "a@b"@evil.example, never a@b@evil.example).
func (a Address) String() string {
	addr := wireAddress(a.Address)
	if a.Name == "" {
		return addr
	}
	plain := a.Name + " <" + addr + ">"
	if p, err := mail.ParseAddress(plain); err == nil && p.Name == a.Name && !strings.Contains(a.Name, "=?") &&
		!strings.ContainsAny(a.Name, `()<>[]:;@\,."`) {
		return plain
	}
	return `"` + quotedPair.Replace(a.Name) + `" <` + addr + ">"
}

// quotedPair escapes a display name inside a quoted string (RFC 5322 §3.2.4).
var quotedPair = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// wireAddress is local@domain as SMTP and the header carry it.
func wireAddress(addr string) string {
	return strings.TrimSuffix(strings.TrimPrefix((&mail.Address{Address: addr}).String(), "<"), ">")
}

func (a Address) mail() mail.Address { return mail.Address{Name: a.Name, Address: a.Address} }

func (a Address) domain() string { return a.Address[strings.LastIndexByte(a.Address, '@')+1:] }

// rawInput is the agent's input as accepted on the wire.
type rawInput struct {
	To      []string `json:"to"`
	Cc      []string `json:"cc"`
	Bcc     []string `json:"bcc"`
	Subject string   `json:"subject"`
	Text    string   `json:"text"`
	HTML    string   `json:"html"`
	ReplyTo string   `json:"reply_to"`
	// Attachments: [{name, content_type, content_base64}].
	Attachments []rawAttachment `json:"attachments"`
}

var knownFields = []string{"to", "cc", "bcc", "subject", "text", "html", "reply_to", "attachments"}

// decode reads the agent's JSON, reporting unknown fields and wrong types
// field by field rather than stopping at the first. It returns the fields
// whose type was wrong, so that later checks do not report them twice.
func decode(raw json.RawMessage, fe *approval.FieldErrors) (rawInput, map[string]bool) {
	var in rawInput
	bad := map[string]bool{}
	var obj map[string]json.RawMessage
	if err := approval.CheckJSONDepth(raw, ""); err != nil {
		*fe = append(*fe, err.(*approval.Error).Details["fields"].([]approval.FieldError)...)
		return in, bad
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&obj); err != nil || obj == nil {
		fe.Add("input", "must be a JSON object")
		return in, bad
	}
	if dec.More() {
		fe.Add("input", "must be a single JSON object")
		return in, bad
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := obj[k]
		var err error
		switch k {
		case "to":
			err = json.Unmarshal(v, &in.To)
		case "cc":
			err = json.Unmarshal(v, &in.Cc)
		case "bcc":
			err = json.Unmarshal(v, &in.Bcc)
		case "subject":
			err = json.Unmarshal(v, &in.Subject)
		case "text":
			err = json.Unmarshal(v, &in.Text)
		case "html":
			err = json.Unmarshal(v, &in.HTML)
		case "reply_to":
			err = json.Unmarshal(v, &in.ReplyTo)
		case "attachments":
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.DisallowUnknownFields()
			err = dec.Decode(&in.Attachments)
		default:
			fe.Add(k, "unknown field; known fields are %s", strings.Join(knownFields, ", "))
			continue
		}
		if err != nil {
			bad[k] = true
			if k == "to" || k == "cc" || k == "bcc" {
				fe.Add(k, "must be a list of strings")
			} else if k == "attachments" {
				fe.Add(k, "must be a list of {name, content_type, content_base64} objects (strings)")
			} else {
				fe.Add(k, "must be a string")
			}
		}
	}
	return in, bad
}

// normalize validates the agent's input and returns its normalized form.
// Every problem is added to fe; the result is only meaningful when fe
// stays empty.
func normalize(raw json.RawMessage, from Address) (Input, approval.FieldErrors) {
	var fe approval.FieldErrors
	in, bad := decode(raw, &fe)
	if len(fe) > 0 && fe[0].Field == "input" {
		return Input{}, fe
	}
	out := Input{From: from}

	seen := map[string]string{} // dedupe key -> field where first seen
	list := func(field string, raws []string) []Address {
		var addrs []Address
		for i, s := range raws {
			name := fmt.Sprintf("%s[%d]", field, i)
			a, err := parseAddress(s)
			if err != "" {
				fe.Add(name, "%s", err)
				continue
			}
			key := dedupeKey(a)
			if first, dup := seen[key]; dup {
				fe.Add(name, "%s is already a recipient (%s)", a.Address, first)
				continue
			}
			seen[key] = name
			addrs = append(addrs, a)
		}
		return addrs
	}
	out.To = list("to", in.To)
	out.Cc = list("cc", in.Cc)
	out.Bcc = list("bcc", in.Bcc)
	switch n := len(in.To) + len(in.Cc) + len(in.Bcc); {
	case bad["to"] || bad["cc"] || bad["bcc"]:
	case n == 0:
		fe.Add("to", "at least one recipient is required in to, cc or bcc")
	case n > HardMaxRecipients:
		fe.Add("to", "%d recipients; at most %d are accepted", n, HardMaxRecipients)
	}
	if in.ReplyTo != "" {
		if a, err := parseAddress(in.ReplyTo); err != "" {
			fe.Add("reply_to", "%s", err)
		} else {
			out.ReplyTo = &a
		}
	}

	out.Subject = strings.TrimSpace(in.Subject)
	switch {
	case bad["subject"]:
	case out.Subject == "":
		fe.Add("subject", "is required")
	case strings.ContainsAny(out.Subject, "\r\n"):
		fe.Add("subject", "must be a single line (no line breaks)")
	case strings.IndexFunc(out.Subject, unicode.IsControl) >= 0:
		fe.Add("subject", "must not contain control characters")
	case encodedWord(out.Subject):
		fe.Add("subject", "%s", encodedWordReason)
	case utf8.RuneCountInString(out.Subject) > MaxSubjectChars:
		fe.Add("subject", "is %d characters long; at most %d are allowed", utf8.RuneCountInString(out.Subject), MaxSubjectChars)
	}

	out.Text = body(in.Text)
	switch {
	case bad["text"]:
	case strings.TrimSpace(out.Text) == "":
		fe.Add("text", "is required (the plain-text body; html is optional)")
	case strings.ContainsRune(out.Text, 0):
		fe.Add("text", "must not contain NUL characters")
	}
	if in.HTML != "" {
		out.HTML = body(in.HTML)
		switch {
		case strings.TrimSpace(out.HTML) == "":
			fe.Add("html", "is blank; omit it to send text only")
		case strings.ContainsRune(out.HTML, 0):
			fe.Add("html", "must not contain NUL characters")
		}
	}
	out.Attachments = normalizeAttachments(in.Attachments, &fe)
	if n := len(out.Text) + len(out.HTML); n > MaxBodyBytes {
		field := "text"
		if out.HTML != "" {
			field = "html"
		}
		fe.Add(field, "text and html are %d bytes together; at most %d are allowed", n, MaxBodyBytes)
	}
	return out, fe
}

// body turns CRLF and lone CR into "\n" and ends the body with a line
// break, the form in which it survives SMTP unchanged.
func body(s string) string {
	if s == "" {
		return ""
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

// parseAddress normalizes one address, or says why it cannot.
func parseAddress(s string) (Address, string) {
	if strings.ContainsAny(s, "\r\n") {
		return Address{}, "must not contain line breaks"
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Address{}, "is empty"
	case !utf8.ValidString(s):
		return Address{}, "is not valid UTF-8"
	case encodedWord(s):
		// net/mail would decode it here, but a name that decodes to more
		// encoded words, or one in the local part, is decoded again by
		// the recipient's program (guarantee 13).
		return Address{}, encodedWordReason
	case len(s) > maxAddressBytes:
		return Address{}, fmt.Sprintf("is longer than %d bytes", maxAddressBytes)
	}
	p, err := mail.ParseAddress(s)
	if err != nil {
		return Address{}, fmt.Sprintf("%q is not a valid email address", s)
	}
	// ParseAddress decodes RFC 2047 names, which can smuggle line breaks.
	name := strings.TrimSpace(p.Name)
	if strings.IndexFunc(name, unicode.IsControl) >= 0 || !utf8.ValidString(name) {
		return Address{}, "display name must not contain line breaks or control characters"
	}
	if encodedWord(name) {
		// Quoted pairs ("=\?utf-8\?q\?…\?\=") hide the syntax from the
		// check on the text as written; the parsed name still holds it.
		return Address{}, encodedWordReason
	}
	at := strings.LastIndexByte(p.Address, '@')
	local, domain := p.Address[:at], p.Address[at+1:]
	wire := wireAddress(p.Address)
	switch {
	case !isASCII(local):
		return Address{}, fmt.Sprintf("%q: non-ASCII local parts are not supported", wire)
	case !dotAtom.MatchString(local):
		// A quoted local part ("ada@client.example"@evil.io) reads as
		// another address and is refused by many servers: accept only what
		// every server takes and every person reads the same way.
		return Address{}, fmt.Sprintf("%s: the part before the last @ must be letters, digits and .!#$%%&'*+/=?^_`{|}~- "+
			"(quoted local parts are not accepted)", wire)
	case len(local) > maxLocalBytes:
		return Address{}, fmt.Sprintf("%q: the part before @ is longer than %d characters", p.Address, maxLocalBytes)
	}
	d, derr := normalizeDomain(domain)
	if derr != nil {
		return Address{}, fmt.Sprintf("%q: %v", wire, derr)
	}
	a := Address{Name: name, Address: local + "@" + d}
	if !survives(a) {
		return Address{}, fmt.Sprintf("%s: the display name would not reach the recipient as written; write it plainly", a.Address)
	}
	return a, ""
}

// encodedWord reports whether s holds RFC 2047 encoded-word syntax
// ("=?charset?Q?…?=", in any case, with or without an RFC 2231 language):
// the recipient's mail program decodes it into other text than the
// approver reads. Lenient decoders (most mail programs) decode it inside
// quoted strings, inside words and across malformed parts too, so any
// "=?" followed later by "?=" counts.
func encodedWord(s string) bool {
	i := strings.Index(s, "=?")
	return i >= 0 && strings.Contains(s[i+2:], "?=")
}

const encodedWordReason = `holds "=?…?=", which mail programs decode (RFC 2047 encoded words) into other text ` +
	`than the approver reads; write the text itself`

// dotAtom is RFC 5322's dot-atom of atext: the local parts that need no
// quoting anywhere.
var dotAtom = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$")

// survives reports whether a is written in a header (as go-mail writes
// it, net/mail's form) and read back by a recipient unchanged: prepare
// accepts only addresses that the sender sends exactly as shown.
func survives(a Address) bool {
	m := a.mail()
	back, err := mail.ParseAddress(m.String())
	return err == nil && back.Name == a.Name && back.Address == a.Address
}

// dedupeKey treats local parts case-insensitively: RFC 5321 allows
// case-sensitive mailboxes, but virtually no server has them, and the
// safer mistake is to refuse a near-duplicate rather than mail one
// person twice.
func dedupeKey(a Address) string { return strings.ToLower(a.Address) }

// recipients lists every recipient: To, then Cc, then Bcc.
func (in *Input) recipients() []Address {
	return slices.Concat(in.To, in.Cc, in.Bcc)
}
