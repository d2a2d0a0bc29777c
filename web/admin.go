package web

import (
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/gofiber/fiber/v2"
)

// The admin API (SPEC §6): operators, with an operator key, see every
// principal's operations, cancel them, and settle the ones left executing.
// Operator keys work here only, agents' keys never do.

const operatorLocal = "operator"

// adminRoutes must be registered before the agents' /v1 group, whose
// middleware would otherwise authenticate /v1/admin requests as agents.
func (s *Server) adminRoutes() {
	adm := s.app.Group("/v1/admin", s.authenticateOperator, readBody(s.cfg.BodyLimit))
	adm.Get("/operations", s.adminList)
	adm.Get("/operations/:key", s.adminGet)
	adm.Post("/operations/:key/cancel", s.adminCancel)
	adm.Post("/operations/:key/reconcile", s.adminReconcile)
	adm.Post("/allowances/:id/revoke", s.adminRevoke)
	adm.Post("/approvers/:id/enroll", s.adminEnroll)
	adm.Get("/audit/head", s.adminAuditHead)
	adm.All("/*", func(c *fiber.Ctx) error {
		return approval.Errorf(approval.CodeNotFound, "no such admin endpoint %s %s", c.Method(), c.Path())
	})
}

// authenticateOperator checks the bearer operator key and the operator's
// rate limit (the same budget per minute as a principal's).
func (s *Server) authenticateOperator(c *fiber.Ctx) error {
	auth := c.Get(fiber.HeaderAuthorization)
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok && auth != "" {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="countersign-admin"`)
		return approval.Errorf(approval.CodeUnauthenticated, "use Authorization: Bearer <operator key>")
	}
	o, err := s.svc.AuthenticateOperator(strings.TrimSpace(key))
	if err != nil {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="countersign-admin"`)
		return err
	}
	if s.cfg.Limiter != nil {
		ok, wait, err := s.cfg.Limiter.Allow(c.UserContext(), "admin:"+o.ID, adminRate, time.Minute)
		if err != nil {
			return err
		}
		if !ok {
			secs := int(wait.Seconds()) + 1
			return approval.Errorf(approval.CodeRateLimited, "more than %d requests a minute; retry in %d s", adminRate, secs).
				WithDetails(map[string]any{"retry_after_seconds": secs})
		}
	}
	c.Locals(operatorLocal, o)
	return c.Next()
}

// adminRate is the requests per minute of one operator.
const adminRate = 600

func operator(c *fiber.Ctx) *approval.Operator {
	return c.Locals(operatorLocal).(*approval.Operator)
}

func (s *Server) adminView(op *approval.Operation) approval.AdminView {
	return approval.OperatorView(op, s.svc.Now())
}

// adminQueryParams are the query parameters of GET /v1/admin/operations.
var adminQueryParams = []string{"status", "principal", "stuck", "older_than_seconds", "limit"}

// adminList is GET /v1/admin/operations?status=&principal=&stuck=true&older_than_seconds=N.
// Unknown parameters are refused: a typo must not list everything.
func (s *Server) adminList(c *fiber.Ctx) error {
	var fe approval.FieldErrors
	c.Context().QueryArgs().VisitAll(func(k, _ []byte) {
		if name := string(k); !contains(adminQueryParams, name) {
			fe.Add(name, "unknown query parameter; use %s", strings.Join(adminQueryParams, ", "))
		}
	})
	q := approval.AdminQuery{Status: approval.Status(c.Query("status")), Principal: c.Query("principal")}
	switch c.Query("stuck") {
	case "", "false":
	case "true":
		q.Stuck = true
	default:
		fe.Add("stuck", "must be true or false")
	}
	if v := c.Query("older_than_seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fe.Add("older_than_seconds", "must be a whole number of seconds, 0 or more")
		}
		q.OlderThan = time.Duration(n) * time.Second
		if !q.Stuck {
			fe.Add("older_than_seconds", "applies to stuck=true only")
		}
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > approval.MaxAdminList {
			fe.Add("limit", "must be a whole number from 1 to %d", approval.MaxAdminList)
		}
		q.Limit = n
	}
	if err := fe.Err(); err != nil {
		return err
	}
	ops, err := s.svc.AdminList(c.UserContext(), operator(c), q)
	if err != nil {
		return err
	}
	views := make([]approval.AdminView, len(ops))
	for i, op := range ops {
		views[i] = s.adminView(op)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(fiber.Map{"operations": views})
}

func (s *Server) adminGet(c *fiber.Ctx) error {
	op, evs, err := s.svc.AdminGet(c.UserContext(), operator(c), c.Params("key"))
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []approval.Event{}
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(fiber.Map{"operation": s.adminView(op), "events": evs})
}

func (s *Server) adminCancel(c *fiber.Ctx) error {
	op, err := s.svc.AdminCancel(c.UserContext(), operator(c), c.Params("key"))
	if err != nil {
		return err
	}
	return c.JSON(s.adminView(op))
}

// adminRevoke ends an allowance at once, audited as done by the operator.
func (s *Server) adminRevoke(c *fiber.Ctx) error {
	op, err := s.svc.RevokeAllowance(c.UserContext(), c.Params("id"), "operator:"+operator(c).ID)
	if err != nil {
		return err
	}
	return c.JSON(s.adminView(op))
}

func (s *Server) adminReconcile(c *fiber.Ctx) error {
	var req approval.ReconcileCall
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	op, err := s.svc.AdminReconcile(c.UserContext(), operator(c), c.Params("key"), req.Outcome, req.Note)
	if err != nil {
		return err
	}
	return c.JSON(s.adminView(op))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// adminEnroll is POST /v1/admin/approvers/{id}/enroll: a single-use
// passkey enrolment link goes to the approver through their channels. The
// operator learns where it went, never the link.
func (s *Server) adminEnroll(c *fiber.Ctx) error {
	res, err := s.svc.StartEnrolment(c.UserContext(), operator(c), c.Params("id"))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(fiber.StatusAccepted).JSON(res)
}

// adminAuditHead is GET /v1/admin/audit/head: where every audit chain
// stands (last seq and hash), signed with the receipt key, so that
// countersign audit verify --head can tell whether events were cut from
// the end of a log file (SPEC §9). The claims are repeated unsigned for
// reading; only the JWS counts.
func (s *Server) adminAuditHead(c *fiber.Ctx) error {
	if s.cfg.AuditHead == nil {
		return approval.Errorf(approval.CodeNotFound, "this service signs no audit head (no receipt key)")
	}
	jws, claims, err := s.cfg.AuditHead(c.UserContext())
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(fiber.Map{"head": jws, "iss": claims.Issuer, "iat": claims.IssuedAt, "chains": claims.Chains})
}
