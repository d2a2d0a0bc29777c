package email

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/approval"
)

// preview renders in for the approver and the agent. Every field shows the
// normalized value that Execute sends, verbatim.
func preview(in *Input) approval.Preview {
	join := func(l []Address) string {
		s := make([]string, len(l))
		for i, a := range l {
			s[i] = a.String()
		}
		return strings.Join(s, ", ")
	}
	rcpts := in.recipients()
	p := approval.Preview{
		Title:   "Send an email to " + rcpts[0].Address,
		Summary: summary(in),
		Fields:  make([]approval.Field, 0, 8+len(in.Attachments)),
	}
	if len(rcpts) > 1 {
		p.Title += fmt.Sprintf(" and %d other%s", len(rcpts)-1, plural(len(rcpts)-1))
	}
	add := func(name, label, value string, long bool) {
		p.Fields = append(p.Fields, approval.Field{Name: name, Label: label, Value: value, Long: long})
	}
	// What the email says and to whom first (a phone's first screen);
	// From, which the operator configured and the agent cannot choose,
	// last.
	if len(in.To) > 0 {
		add("to", "To", join(in.To), false)
	}
	if len(in.Cc) > 0 {
		add("cc", "Cc", join(in.Cc), false)
	}
	if len(in.Bcc) > 0 {
		add("bcc", "Bcc", join(in.Bcc), false)
	}
	if in.ReplyTo != nil {
		add("reply_to", "Reply-To", in.ReplyTo.String(), false)
	}
	add("subject", "Subject", in.Subject, false)
	add("text", "Text", in.Text, true)
	if in.HTML != "" {
		p.Fields = append(p.Fields, approval.Field{Name: "html", Label: "HTML part", Value: in.HTML, Long: true, Format: approval.FormatHTML})
	}
	for i, a := range in.Attachments {
		p.Fields = append(p.Fields, attachmentField(i, a))
		if f, ok := shownAttachment(i, a); ok {
			p.Fields = append(p.Fields, f)
		}
	}
	add("from", "From", in.From.String(), false)
	for _, w := range warnings(in) {
		p.Warn(w.code, w.msg)
	}
	return p
}

func summary(in *Input) string {
	subject := in.Subject
	if utf8.RuneCountInString(subject) > 80 {
		subject = string([]rune(subject)[:79]) + "…"
	}
	n := len(in.recipients())
	var parts []string
	for _, c := range []struct {
		label string
		n     int
	}{{"to", len(in.To)}, {"cc", len(in.Cc)}, {"bcc", len(in.Bcc)}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.label))
		}
	}
	files := ""
	if k := len(in.Attachments); k > 0 {
		files = fmt.Sprintf(", with %d attachment%s", k, plural(k))
	}
	return fmt.Sprintf("Email “%s” from %s to %d recipient%s (%s)%s.", subject, in.From.Address, n, plural(n), strings.Join(parts, ", "), files)
}

// warnings: "irreversible" first (a stable token clients may match), then
// plain sentences about what deserves a second look.
func warnings(in *Input) []warning {
	w := []warning{{approval.WarnIrreversible, "irreversible"}}
	if n := len(in.Bcc); n > 0 {
		w = append(w, warning{warnBcc, fmt.Sprintf("%d hidden (Bcc) recipient%s, not shown to the other recipients: %s.", n, plural(n), list(addresses(in.Bcc)))})
	}
	own := in.From.domain()
	var external, idn []string
	for _, r := range in.recipients() {
		d := r.domain()
		if d != own && !strings.HasSuffix(d, "."+own) {
			external = append(external, r.Address)
		}
		if strings.HasPrefix(d, "xn--") || strings.Contains(d, ".xn--") {
			idn = append(idn, r.Address)
		}
	}
	if r := in.ReplyTo; r != nil {
		if d := r.domain(); strings.HasPrefix(d, "xn--") || strings.Contains(d, ".xn--") {
			idn = append(idn, r.Address)
		}
	}
	if len(external) > 0 && strings.Contains(own, ".") {
		w = append(w, warning{warnExternal, fmt.Sprintf("Recipients outside %s: %s.", own, list(external))})
	}
	// The recipients read From, but their answers go to Reply-To.
	if r := in.ReplyTo; r != nil {
		if d := r.domain(); d != own && !strings.HasSuffix(d, "."+own) {
			w = append(w, warning{warnExternalReplyTo, fmt.Sprintf("Replies go to %s, outside %s: recipients who answer write to that address, not to %s.",
				r.Address, own, in.From.Address)})
		}
	}
	var named []string
	for _, r := range in.recipients() {
		if strings.ContainsAny(r.Name, addressLike) {
			named = append(named, r.String())
		}
	}
	if in.ReplyTo != nil && strings.ContainsAny(in.ReplyTo.Name, addressLike) {
		named = append(named, in.ReplyTo.String())
	}
	if len(named) > 0 {
		w = append(w, warning{warnNameLikeAddress, fmt.Sprintf("A display name looks like an address; the mail goes to the address in angle brackets: %s.", list(named))})
	}
	if len(idn) > 0 {
		w = append(w, warning{warnIDN, fmt.Sprintf("Internationalized domain shown in its ASCII form; check it is the one you expect: %s.", list(idn))})
	}
	return append(w, attachmentWarnings(in.Attachments)...)
}

// addressLike are the characters that make a display name read as an
// address: @ and angle brackets, in ASCII and in their full-width and
// small look-alikes.
const addressLike = "@<>＠﹫＜＞﹤﹥‹›〈〉"

func addresses(l []Address) []string {
	s := make([]string, len(l))
	for i, a := range l {
		s[i] = a.Address
	}
	return s
}

func list(s []string) string {
	const show = 5
	if len(s) <= show {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:show], ", ") + fmt.Sprintf(" and %d more", len(s)-show)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
