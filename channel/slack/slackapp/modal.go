package slackapp

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/countersign/countersign/approval"
	"github.com/slack-go/slack"
)

// viewSubmission handles a modal submitted; it returns the response
// (an error on the form, or the modal replaced by an explanation), or nil
// to close the modal.
func (h *Handler) viewSubmission(ctx context.Context, ic *slack.InteractionCallback) any {
	if ic.View.CallbackID == CallbackReview {
		return h.reviewSubmission(ctx, ic)
	}
	if ic.View.CallbackID == CallbackEdit {
		return h.editSubmission(ctx, ic)
	}
	if ic.View.CallbackID != CallbackReject {
		return nil
	}
	var st modalState
	if err := json.Unmarshal([]byte(ic.View.PrivateMetadata), &st); err != nil || st.Operation == "" {
		return modalNotice("This form is not a valid countersign form. Nothing was recorded.")
	}
	a, why := h.approver(ic)
	if a == nil {
		h.log.Info("slack: rejection refused", "operation", st.Operation, "user", ic.User.ID, "why", why)
		return modalNotice(why)
	}
	var reason string
	if ic.View.State != nil {
		reason = strings.TrimSpace(ic.View.State.Values[reasonBlock][reasonAction].Value)
	}
	if reason == "" {
		return slack.NewErrorsViewSubmissionResponse(map[string]string{reasonBlock: "Please say why, so the requester can act on it."})
	}
	op, res, err := h.cfg.Service.DecideAs(ctx, st.Operation, a.ID, Via, st.PayloadHash, false, reason)
	if why := h.explain(op, res, err, a); why != "" {
		h.log.Info("slack: rejection refused", "operation", st.Operation, "approver", a.ID, "why", why)
		return modalNotice(why)
	}
	h.log.Info("slack: rejection recorded", "operation", st.Operation, "approver", a.ID)
	return nil // closes the modal
}

// modalNotice replaces the modal with an explanation.
func modalNotice(text string) *slack.ViewSubmissionResponse {
	return slack.NewUpdateViewSubmissionResponse(&slack.ModalViewRequest{
		Type: slack.VTModal, Title: plain("Not recorded"), Close: plain("Close"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewSectionBlock(mrkdwn(text), nil, nil)}},
	})
}

// rejectModal is the modal asking for a reason. It names the operation by
// the title of its message (m), escaped like every agent-chosen string.
func rejectModal(op *approval.Operation, m approval.Message, st modalState) slack.ModalViewRequest {
	meta, _ := json.Marshal(st)
	title := m.Title
	if title == "" {
		title = op.Action
	}
	input := slack.NewPlainTextInputBlockElement(plain("What should change, or why not at all?"), reasonAction)
	input.Multiline = true
	input.MaxLength = 2000
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: CallbackReject, PrivateMetadata: string(meta),
		Title: plain("Reject"), Submit: plain("Reject"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(mrkdwn(truncate("*"+escape(title)+"*\nPayload `"+escape(approval.ShortHash(op.PayloadHash))+
				"` · `"+escape(op.Key)+"`", 3000)), nil, nil),
			slack.NewInputBlock(reasonBlock, plain("Why are you rejecting it?"),
				plain("The agent that asked sees this reason. Nothing is done either way."), input),
		}},
	}
}

func (h *Handler) openRejectModal(trigger string, op *approval.Operation, st modalState) {
	view := rejectModal(op, approval.BuildMessage(op, h.cfg.Service.Policy(), h.cfg.Service.Now()), st)
	h.background(func(ctx context.Context) {
		if _, err := h.cfg.Client.OpenViewContext(ctx, trigger, view); err != nil {
			h.log.Warn("slack: could not open the reject modal", "operation", st.Operation, "err", err)
		}
	})
}
