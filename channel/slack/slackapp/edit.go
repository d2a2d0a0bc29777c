package slackapp

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/countersign/countersign/approval"
	"github.com/slack-go/slack"
)

// Edit as a new version from Slack (SPEC §10): on a route with allow_edit
// the message carries Edit. It opens, to the clicking approver alone, a
// modal with the editable fields as they are; submitting makes the new
// version (approval.Service.Edit), which goes to the approvers like any
// operation, and the original ends superseded. The modal's inputs are
// numbered in the order of the action's editable fields: the submission
// finds them again from the same version (its payload hash is checked), so
// no field name travels through Slack.

// CallbackEdit is the callback id of the edit modal.
const CallbackEdit = "countersign_edit"

// Slack's plain_text_input holds at most 3,000 characters; past that, or
// past editModalFields inputs, the edit happens on the approval page.
const (
	maxEditChars    = 3000
	editModalFields = 40
	editValue       = "v"
)

func editBlock(i int) string { return "f" + strconv.Itoa(i) }

// edit answers an Edit click of an approver who may decide op.
func (h *Handler) edit(ctx context.Context, ic *slack.InteractionCallback, op *approval.Operation, a *approval.Approver, st modalState) {
	fields := h.cfg.Service.EditableFields(op)
	if len(fields) == 0 {
		h.refuse(st.Channel, ic.User.ID, st.Operation, "This request cannot be edited. Nothing was changed.")
		return
	}
	if view, ok := editModal(op, fields, st); ok && op.Route.StepUp == "" {
		h.background(func(ctx context.Context) {
			if _, err := h.cfg.Client.OpenViewContext(ctx, ic.TriggerID, view); err != nil {
				h.log.Warn("slack: could not open the edit modal", "operation", st.Operation, "err", err)
			}
		})
		return
	}
	link, err := h.cfg.Service.ReviewLink(ctx, op.Key, a.ID, Via, st.PayloadHash)
	if why := h.explain(op, approval.DecideResult{Outcome: approval.DecideRecorded}, err, a); why != "" {
		h.refuse(st.Channel, ic.User.ID, st.Operation, why)
		return
	}
	h.log.Info("slack: personal edit link sent", "operation", st.Operation, "approver", a.ID)
	h.ephemeral(st.Channel, ic.User.ID, "This request is too long to edit in Slack. Edit it on your personal approval page "+
		"(only you can see this message; the link decides in your name, so do not forward it):\n"+link)
}

// editModal is the modal of the editable fields, if Slack can hold them.
func editModal(op *approval.Operation, fields []approval.EditableField, st modalState) (slack.ModalViewRequest, bool) {
	if len(fields) > editModalFields {
		return slack.ModalViewRequest{}, false
	}
	blocks := []slack.Block{slack.NewContextBlock("", mrkdwn(truncate("Your edit becomes a new version (a new fingerprint) that goes to the approvers; "+
		"this version (`"+escape(approval.ShortHash(op.PayloadHash))+"`) will then not run. The agent is told what changed.", 3000)))}
	for i, f := range fields {
		if utf8.RuneCountInString(f.Value) > maxEditChars {
			return slack.ModalViewRequest{}, false
		}
		in := slack.NewPlainTextInputBlockElement(nil, editValue)
		in.InitialValue = f.Value
		in.Multiline = f.Long
		in.MaxLength = maxEditChars
		label := f.Label
		if label == "" {
			label = f.Name
		}
		b := slack.NewInputBlock(editBlock(i), plain(truncate(label, 2000)), nil, in)
		b.Optional = true // an emptied field is the action's to refuse, with its reason
		blocks = append(blocks, b)
	}
	meta, _ := json.Marshal(st)
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: CallbackEdit, PrivateMetadata: string(meta),
		Title: plain("Edit"), Submit: plain("Send new version"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: blocks},
	}, true
}

// editSubmission makes the new version from the submitted modal.
func (h *Handler) editSubmission(ctx context.Context, ic *slack.InteractionCallback) any {
	var st modalState
	if err := json.Unmarshal([]byte(ic.View.PrivateMetadata), &st); err != nil || st.Operation == "" {
		return modalNotice("This form is not a valid countersign form. Nothing was changed.")
	}
	a, why := h.approver(ic)
	if a == nil {
		h.log.Info("slack: edit refused", "operation", st.Operation, "user", ic.User.ID, "why", why)
		return modalNotice(why)
	}
	op, why := h.precheck(ctx, st.Operation, a, st.PayloadHash, approval.OnPage)
	if why != "" {
		return modalNotice(why)
	}
	fields := h.cfg.Service.EditableFields(op)
	changes := map[string]string{}
	for i, f := range fields {
		if ic.View.State == nil {
			break
		}
		if v, ok := ic.View.State.Values[editBlock(i)][editValue]; ok {
			changes[f.Name] = v.Value
		}
	}
	next, err := h.cfg.Service.Edit(ctx, st.Operation, a.ID, Via, st.PayloadHash, changes)
	var refusal *approval.Refusal
	var aerr *approval.Error
	switch {
	case errors.As(err, &refusal):
		return modalNotice(refusal.Reason + ". Nothing was changed.")
	case errors.As(err, &aerr) && aerr.Code == approval.CodeInvalidInput:
		return slack.NewErrorsViewSubmissionResponse(fieldErrors(fields, aerr))
	case errors.As(err, &aerr) && aerr.Code != approval.CodeUnavailable:
		return modalNotice(aerr.Message + ". Nothing was changed.")
	case err != nil:
		h.log.Warn("slack: edit failed", "operation", st.Operation, "approver", a.ID, "err", approval.SafeError(err))
		return modalNotice("countersign could not record this now. Nothing was changed; please try again.")
	}
	h.log.Info("slack: edited as a new version", "operation", st.Operation, "approver", a.ID, "new", next.Key)
	return slack.NewUpdateViewSubmissionResponse(&slack.ModalViewRequest{
		Type: slack.VTModal, Title: plain("Edited"), Close: plain("Close"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewSectionBlock(mrkdwn(
			"You edited it. The new version (`"+escape(next.Key)+"`) was sent to the approvers; this version will not run."), nil, nil)}},
	})
}

// fieldErrors places an invalid_input error on the inputs it names, or on
// the first input when it names none of them.
func fieldErrors(fields []approval.EditableField, e *approval.Error) map[string]string {
	out := map[string]string{}
	if list, ok := e.Details["fields"].([]approval.FieldError); ok {
		for _, fe := range list {
			for i, f := range fields {
				if f.Name == fe.Field {
					out[editBlock(i)] = truncate(fe.Reason, 2000)
				}
			}
		}
	}
	if len(out) == 0 {
		out[editBlock(0)] = truncate(e.Message, 2000)
	}
	return out
}
