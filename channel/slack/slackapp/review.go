package slackapp

import (
	"context"
	"encoding/json"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/slack/slackwire"
	"github.com/slack-go/slack"
)

// An approval message that cannot show its operation whole carries Review
// instead of Approve (guarantee 11). Review brings the whole operation to
// the clicking approver alone: a modal holding all of it, whose submit
// button approves, when Slack can show it; otherwise a personal approval
// link, minted for that approver and sent in an ephemeral message that no
// one else sees, to review and decide on the approval page.

// review answers a Review click of an approver who may decide op.
func (h *Handler) review(ctx context.Context, ic *slack.InteractionCallback, op *approval.Operation, a *approval.Approver, st modalState) {
	m := approval.BuildMessage(op, h.cfg.Service.Policy(), h.cfg.Service.Now())
	// A step-up route is decided on the page only, with a passkey: never
	// from a modal (the service would refuse its submission anyway).
	if view, ok := reviewModal(m, st); ok && m.StepUp == "" {
		h.background(func(ctx context.Context) {
			if _, err := h.cfg.Client.OpenViewContext(ctx, ic.TriggerID, view); err != nil {
				h.log.Warn("slack: could not open the review modal", "operation", st.Operation, "err", err)
			}
		})
		return
	}
	link, err := h.cfg.Service.ReviewLink(ctx, op.Key, a.ID, Via, st.PayloadHash)
	if why := h.explain(op, approval.DecideResult{Outcome: approval.DecideRecorded}, err, a); why != "" {
		h.refuse(st.Channel, ic.User.ID, st.Operation, why)
		return
	}
	why := "This request is too long for Slack, so it is not approved here. Your personal approval page shows all of it "
	if m.StepUp != "" {
		why = "This request needs your passkey, so Slack cannot decide it. Decide on your personal approval page, with your passkey "
	}
	text := why + "(only you can see this message; the link decides in your name, so do not forward it; opening it decides nothing):\n" + link
	h.log.Info("slack: personal review link sent", "operation", st.Operation, "approver", a.ID)
	h.ephemeral(st.Channel, ic.User.ID, text)
}

// reviewModal is the whole operation in a modal with an Approve submit
// button, if Slack can show it whole there.
func reviewModal(m approval.Message, st modalState) (slack.ModalViewRequest, bool) {
	c := slackwire.BuildContent(m)
	blocks := c.Blocks
	if len(m.Warnings) > 0 {
		// Plain text: warnings quote agent text, which mrkdwn would format.
		text := ":warning: Warnings"
		for _, w := range m.Warnings {
			text += "\n• " + w
		}
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType,
			truncate(text, slackwire.MaxSectionText), true, false), nil, nil))
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn("Fingerprint `"+escape(m.ShortHash())+"` · `"+escape(m.OperationKey)+
		"` · Approve carries it out exactly as shown, once.")))
	if !c.Whole || len(blocks) > slackwire.MaxModalBlocks || c.Chars > slackwire.MaxModalChars {
		return slack.ModalViewRequest{}, false
	}
	meta, _ := json.Marshal(st)
	return slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: CallbackReview, PrivateMetadata: string(meta),
		Title: plain("Review"), Submit: plain("Approve"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: blocks},
	}, true
}

// reviewSubmission approves from the review modal.
func (h *Handler) reviewSubmission(ctx context.Context, ic *slack.InteractionCallback) any {
	var st modalState
	if err := json.Unmarshal([]byte(ic.View.PrivateMetadata), &st); err != nil || st.Operation == "" {
		return modalNotice("This form is not a valid countersign form. Nothing was recorded.")
	}
	a, why := h.approver(ic)
	if a == nil {
		h.log.Info("slack: approval refused", "operation", st.Operation, "user", ic.User.ID, "why", why)
		return modalNotice(why)
	}
	op, res, err := h.cfg.Service.DecideAs(ctx, st.Operation, a.ID, Via, st.PayloadHash, true, "")
	if why := h.explain(op, res, err, a); why != "" {
		h.log.Info("slack: approval refused", "operation", st.Operation, "approver", a.ID, "why", why)
		return modalNotice(why)
	}
	h.log.Info("slack: approval recorded", "operation", st.Operation, "approver", a.ID, "via", "review modal")
	return nil
}
