package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/gofiber/fiber/v2"
)

// The operator console (GET /console): every principal's operations with
// filters, stuck executions, and each operation with its audit trail
// (GET /console/{key}), with cancel and reconcile (POST, with the
// session's CSRF token), recorded in the audit as operator:<id>, through
// the same service calls as the admin API. An operator never decides.

type consoleRow struct {
	Key, Status, Action, Principal, Title string
	Created                               time.Time
	Stuck                                 bool
}

type stuckRow struct {
	Key, Principal, Action string
	Since                  time.Time
}

type consoleData struct {
	Name, Operator       string
	Status, Principal    string
	Stuck                bool
	Statuses, Principals []string
	Ops                  []consoleRow
	StuckOps             []stuckRow
	SignOut              string
}

// consoleList bounds one console listing.
const consoleList = 200

func (s *Server) operatorOf(ss *session) *approval.Operator {
	return s.svc.Policy().Operator(ss.Operator)
}

func (s *Server) console(c *fiber.Ctx) error {
	ss := sessionOf(c)
	o := s.operatorOf(ss)
	q := approval.AdminQuery{Status: approval.Status(c.Query("status")), Principal: c.Query("principal"),
		Stuck: c.Query("stuck") == "true", Limit: consoleList}
	if q.Stuck && q.Status != approval.StatusExecuting {
		q.Status = ""
	}
	if q.Status != "" && !q.Status.Valid() {
		q.Status = ""
	}
	ops, err := s.svc.AdminList(c.UserContext(), o, q)
	if err != nil {
		return err
	}
	stuck, err := s.svc.StuckOperations(c.UserContext(), "", approval.DefaultStuckAfter, consoleList)
	if err != nil {
		return err
	}
	now := s.svc.Now()
	d := consoleData{Name: ss.Name, Operator: o.ID, Status: string(q.Status), Principal: q.Principal, Stuck: q.Stuck,
		SignOut: s.sessionCSRF(ss, "signout")}
	for _, st := range approval.Statuses {
		d.Statuses = append(d.Statuses, string(st))
	}
	for _, p := range s.svc.Policy().Principals {
		d.Principals = append(d.Principals, p.ID)
	}
	for _, op := range ops {
		m := approval.BuildMessage(op, s.svc.Policy(), now)
		d.Ops = append(d.Ops, consoleRow{Key: op.Key, Status: string(op.EffectiveStatus(now)), Action: op.Action,
			Principal: op.Principal, Title: m.Title, Created: op.CreatedAt, Stuck: approval.Stuck(op, now, approval.DefaultStuckAfter)})
	}
	for _, op := range stuck {
		since := op.UpdatedAt
		if op.ClaimedAt != nil {
			since = *op.ClaimedAt
		}
		d.StuckOps = append(d.StuckOps, stuckRow{Key: op.Key, Principal: op.Principal, Action: op.Action, Since: since})
	}
	c.Type("html", "utf-8")
	return s.pages.ExecuteTemplate(c, "console", d)
}

type consoleOpData struct {
	Key, Principal, Route, Operator string
	Stuck                           bool
	Page                            pageData
	Events                          []approval.Event
	CanCancel, CanReconcile         bool
	CancelCSRF, ReconcileCSRF       string
	Notice, NoticeKind              string
	SignOut                         string
}

func (s *Server) consoleOp(c *fiber.Ctx) error {
	return s.renderConsoleOp(c, "", "")
}

func (s *Server) renderConsoleOp(c *fiber.Ctx, notice, kind string) error {
	ss := sessionOf(c)
	o := s.operatorOf(ss)
	op, evs, err := s.svc.AdminGet(c.UserContext(), o, c.Params("key"))
	if approval.ErrorCode(err) == approval.CodeNotFound {
		return s.problemPage(c, http.StatusNotFound, "No such operation", "There is no operation with this key (finished ones are removed after their retention).")
	}
	if err != nil {
		return err
	}
	now := s.svc.Now()
	m := approval.BuildMessage(op, s.svc.Policy(), now)
	d := consoleOpData{Key: op.Key, Principal: op.Principal, Route: op.Route.Name, Operator: o.ID,
		Stuck: approval.Stuck(op, now, approval.DefaultStuckAfter), Events: evs, Notice: notice, NoticeKind: kind,
		SignOut: s.sessionCSRF(ss, "signout")}
	d.Page.M = m
	d.Page.describe(m, now)
	d.Page.Refresh = 0
	st := op.EffectiveStatus(now)
	if st == approval.StatusDraft || st == approval.StatusPending {
		d.CanCancel, d.CancelCSRF = true, s.sessionCSRF(ss, "cancel:"+op.Key)
	}
	if st == approval.StatusExecuting {
		d.CanReconcile, d.ReconcileCSRF = true, s.sessionCSRF(ss, "reconcile:"+op.Key)
	}
	c.Type("html", "utf-8")
	return s.pages.ExecuteTemplate(c, "console-op", d)
}

func (s *Server) consoleCancel(c *fiber.Ctx) error {
	ss := sessionOf(c)
	key := c.Params("key")
	if ok, err := s.checkForm(c, ss, "cancel:"+key); !ok {
		return err
	}
	_, err := s.svc.AdminCancel(c.UserContext(), s.operatorOf(ss), key)
	switch approval.ErrorCode(err) {
	case "":
		return s.renderConsoleOp(c, "Canceled. Nothing will be sent or run.", "ok")
	case approval.CodeInvalidState, approval.CodeNotFound:
		c.Status(http.StatusConflict)
		return s.renderConsoleOp(c, "Not canceled: "+errText(err), "bad")
	}
	return err
}

func (s *Server) consoleReconcile(c *fiber.Ctx) error {
	ss := sessionOf(c)
	key := c.Params("key")
	if ok, err := s.checkForm(c, ss, "reconcile:"+key); !ok {
		return err
	}
	outcome := approval.Status(postValue(c, "outcome"))
	_, err := s.svc.AdminReconcile(c.UserContext(), s.operatorOf(ss), key, outcome, postValue(c, "note"))
	switch approval.ErrorCode(err) {
	case "":
		return s.renderConsoleOp(c, "Reconciled as "+string(outcome)+"; your note is in the audit.", "ok")
	case approval.CodeInvalidInput, approval.CodeInvalidState:
		c.Status(http.StatusBadRequest)
		return s.renderConsoleOp(c, "Not reconciled: "+errText(err), "bad")
	}
	return err
}

// errText is what an operator reads of a coded error.
func errText(err error) string {
	var e *approval.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
