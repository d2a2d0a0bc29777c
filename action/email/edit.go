package email

import (
	"encoding/json"

	"github.com/countersign/countersign/approval"
)

var _ approval.Editor = (*Action)(nil)

// Editable: an approver may change the subject and the text, and the HTML
// part when there is one; never who receives it or who sends it.
func (a *Action) Editable(op *approval.Operation) []approval.EditableField {
	var in Input
	if json.Unmarshal(op.Input, &in) != nil {
		return nil
	}
	out := []approval.EditableField{
		{Name: "subject", Label: "Subject", Value: in.Subject},
		{Name: "text", Label: "Text", Value: in.Text, Long: true},
	}
	if in.HTML != "" {
		out = append(out, approval.EditableField{Name: "html", Label: "HTML part", Value: in.HTML, Long: true})
	}
	return out
}

// EditInput rebuilds the agent-shaped input of op with the edited fields:
// the addresses in their wire form, which Prepare normalizes to the same
// addresses again.
func (a *Action) EditInput(op *approval.Operation, changes map[string]string) (json.RawMessage, error) {
	var in Input
	if err := json.Unmarshal(op.Input, &in); err != nil {
		return nil, approval.Errorf(approval.CodeInvalidState, "the stored email is unreadable")
	}
	raw := rawInput{Subject: in.Subject, Text: in.Text, HTML: in.HTML}
	for _, l := range []struct {
		dst *[]string
		src []Address
	}{{&raw.To, in.To}, {&raw.Cc, in.Cc}, {&raw.Bcc, in.Bcc}} {
		for _, ad := range l.src {
			*l.dst = append(*l.dst, ad.String())
		}
	}
	if in.ReplyTo != nil {
		raw.ReplyTo = in.ReplyTo.String()
	}
	for name, v := range changes {
		switch name {
		case "subject":
			raw.Subject = v
		case "text":
			raw.Text = v
		case "html":
			if in.HTML == "" {
				return nil, approval.EditError(name)
			}
			raw.HTML = v
		default:
			return nil, approval.EditError(name)
		}
	}
	return json.Marshal(raw)
}
