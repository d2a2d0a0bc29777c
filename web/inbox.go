package web

import (
	"net/http"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/gofiber/fiber/v2"
)

// The approver inbox (GET /inbox): what awaits the signed-in approver,
// newest first, and each operation on its own page (GET /inbox/{key}),
// rendered by the approval page's own template from the same
// approval.Message. Deciding there (POST /inbox/{key}) follows the page's
// rules: only a POST from the rendered form, from this site, with the
// session's CSRF token for this operation, naming the payload hash the
// person was shown; the service then applies separation of duties,
// quorum, the hash check, the re-check of state-bound actions and
// step-up, exactly as for a link.

type inboxItem struct {
	Key          string
	M            approval.Message
	ExpiresIn    string
	ExpiresISO   string
	Irreversible bool
	StepUp       bool
}

type inboxData struct {
	Name    string
	Items   []inboxItem
	SignOut string
}

func (s *Server) inbox(c *fiber.Ctx) error {
	ss := sessionOf(c)
	ops, err := s.svc.Inbox(c.UserContext(), ss.Approver)
	if err != nil {
		return err
	}
	now := s.svc.Now()
	d := inboxData{Name: ss.Name, SignOut: s.sessionCSRF(ss, "signout")}
	for _, op := range ops {
		m := approval.BuildMessage(op, s.svc.Policy(), now)
		it := inboxItem{Key: op.Key, M: m, ExpiresIn: human(m.ExpiresAt.Sub(now)),
			ExpiresISO: m.ExpiresAt.UTC().Format(time.RFC3339), StepUp: op.Route.StepUp != ""}
		for _, w := range m.Warnings {
			it.Irreversible = it.Irreversible || w == "irreversible"
		}
		d.Items = append(d.Items, it)
	}
	c.Type("html", "utf-8")
	if c.Method() == fiber.MethodHead {
		return nil
	}
	return s.pages.ExecuteTemplate(c, "inbox", d)
}

// inboxOp is GET /inbox/{key}: the operation as its approval page shows it.
func (s *Server) inboxOp(c *fiber.Ctx) error {
	ss := sessionOf(c)
	v, err := s.svc.OpenAs(c.UserContext(), c.Params("key"), ss.Approver)
	if err != nil {
		return err
	}
	return s.renderInboxOp(c, ss, v, "")
}

func (s *Server) renderInboxOp(c *fiber.Ctx, ss *session, v *approval.LinkView, notice string) error {
	if v.Problem == approval.LinkUnknown {
		return s.problemPage(c, http.StatusNotFound, "Not in your inbox",
			"There is no such operation, or you are not one of its approvers.")
	}
	now := s.svc.Now()
	d := pageData{M: v.Message, Back: "/inbox", Brand: "inbox", SignOut: s.sessionCSRF(ss, "signout")}
	d.describe(v.Message, now)
	status := http.StatusOK
	switch v.Problem {
	case approval.LinkExpired:
		status = http.StatusGone
		d.Headline = "This request has expired"
		d.Explanation = "The approval window ended before it was decided. Nothing was done and nothing can be decided now."
	case approval.LinkUsed:
		d.Headline = "Your decision is recorded"
		d.Explanation = "Here is where the operation stands."
	case approval.LinkFinished:
		d.Headline = "This request is no longer waiting for a decision"
		d.Explanation = "It was decided or ended already. Here is where it stands."
		if v.Stale != nil || (v.Op != nil && v.Op.Error != nil && v.Op.Error.Code == approval.CodeStaleState) {
			d.Headline = "What this request would change has changed"
			d.Explanation = "The target changed after the agent prepared this request, so it cannot be approved. Nothing was written."
		}
	case approval.LinkOK:
		d.Headline = "Approve this action?"
		d.Explanation = "An AI agent prepared it. Nothing happens unless you approve."
		d.CanDecide = true
		d.CSRF = s.sessionCSRF(ss, "decide:"+v.Op.Key)
		d.Action = "/inbox/" + v.Op.Key
		d.PayloadHash = v.Op.PayloadHash
		d.ApproverName = v.Approver.DisplayName()
		d.ExpiresLocal = localTime(v.Op.ExpiresAt, v.Approver.TimeZone)
		d.Refresh = 0
		if err := s.stepUpFor(c, &d, v); err != nil {
			return err
		}
	}
	if notice != "" {
		d.Notice, d.NoticeKind = notice, "ok"
		d.Headline = "Thank you"
		d.Explanation = "Your decision is recorded. This page follows the operation to its outcome."
		if v.Message.Status == approval.StatusRejected {
			d.NoticeKind = "bad"
		}
		d.CanDecide, d.CSRF, d.Action, d.StepUp, d.PayloadHash = false, "", "", nil, ""
	}
	return s.renderPage(c, status, d)
}

// inboxDecide is POST /inbox/{key}.
func (s *Server) inboxDecide(c *fiber.Ctx) error {
	ss := sessionOf(c)
	key := c.Params("key")
	if ok, err := s.checkForm(c, ss, "decide:"+key); !ok {
		return err
	}
	ctx, approve, ok, err := s.decisionForm(c)
	if !ok {
		return err
	}
	_, res, err := s.svc.DecideAs(ctx, key, ss.Approver, approval.ViaInbox, postValue(c, "payload_hash"), approve, postValue(c, "reason"))
	if refused, rerr := s.refusal(c, err); refused {
		return rerr
	}
	if approval.ErrorCode(err) == approval.CodeNotFound {
		return s.problemPage(c, http.StatusNotFound, "Not in your inbox", "There is no such operation.")
	}
	if err != nil {
		return err
	}
	v, err := s.svc.OpenAs(c.UserContext(), key, ss.Approver)
	if err != nil {
		return err
	}
	switch res.Outcome {
	case approval.DecideApproved, approval.DecideRecorded:
		return s.renderInboxOp(c, ss, v, "You approved it.")
	case approval.DecideRejected:
		return s.renderInboxOp(c, ss, v, "You rejected it. Nothing will be done.")
	case approval.DecideHashMismatch:
		return s.problemPage(c, http.StatusConflict, "This page was out of date",
			"What you were shown is not what the request holds now. Nothing was recorded. Open it again from your inbox.")
	}
	if v.Problem == approval.LinkOK {
		v.Problem = approval.LinkFinished
	}
	return s.renderInboxOp(c, ss, v, "")
}
