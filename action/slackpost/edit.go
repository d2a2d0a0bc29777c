package slackpost

import (
	"encoding/json"

	"github.com/countersign/countersign/approval"
)

var _ approval.Editor = (*Action)(nil)

// Editable: an approver may change the text, never where it goes.
func (a *Action) Editable(op *approval.Operation) []approval.EditableField {
	var in Input
	if json.Unmarshal(op.Input, &in) != nil {
		return nil
	}
	return []approval.EditableField{{Name: "text", Label: "Text", Value: in.Text, Long: true}}
}

// EditInput is op's input with the text edited.
func (a *Action) EditInput(op *approval.Operation, changes map[string]string) (json.RawMessage, error) {
	var in Input
	if err := json.Unmarshal(op.Input, &in); err != nil {
		return nil, approval.Errorf(approval.CodeInvalidState, "the stored message is unreadable")
	}
	for name, v := range changes {
		if name != "text" {
			return nil, approval.EditError(name)
		}
		in.Text = v
	}
	return json.Marshal(in)
}
