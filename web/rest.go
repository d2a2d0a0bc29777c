package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/gofiber/fiber/v2"
)

const principalLocal = "principal"

// authenticate checks the bearer API key. (The service counts every call
// against the principal's rate, in the same store round trip as the call.)
func (s *Server) authenticate(c *fiber.Ctx) error {
	auth := c.Get(fiber.HeaderAuthorization)
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok && auth != "" {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="countersign"`)
		return approval.Errorf(approval.CodeUnauthenticated, "use Authorization: Bearer <api key>")
	}
	p, err := s.svc.Authenticate(strings.TrimSpace(key))
	if err != nil {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="countersign"`)
		if _, oerr := s.svc.AuthenticateOperator(strings.TrimSpace(key)); oerr == nil {
			return approval.Errorf(approval.CodeUnauthenticated, "this is an operator key; it works on the admin API (/v1/admin) only, and agents use their own API key")
		}
		return err
	}
	c.Locals(principalLocal, p)
	return c.Next()
}

func principal(c *fiber.Ctx) *approval.Principal {
	return c.Locals(principalLocal).(*approval.Principal)
}

// decodeStrict decodes a JSON object body, refusing unknown fields and
// trailing data, so that a typo in a field name is an error, not a default.
// The Content-Type is not checked: only bearer-authenticated callers get
// here, and a curl without -H should just work.
func decodeStrict(c *fiber.Ctx, v any) error {
	body := c.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return approval.Errorf(approval.CodeInvalidInput, "request body is empty; send a JSON object")
	}
	if err := approval.CheckJSONDepth(body, ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		switch {
		case errors.As(err, &ute):
			return approval.FieldErrors{{Field: ute.Field, Reason: "must be " + ute.Type.String()}}.Err()
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return approval.FieldErrors{{Field: f, Reason: "unknown field"}}.Err()
		}
		return approval.Errorf(approval.CodeInvalidInput, "request body is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return approval.Errorf(approval.CodeInvalidInput, "request body has data after the JSON object")
	}
	return nil
}

// view is the agent's view of op, compact (SPEC §13): large input values
// stand in as their size, digest and head. get's ?full=1 is the only way
// to the whole input.
func (s *Server) view(op *approval.Operation) approval.View {
	return approval.Compact(approval.AgentView(op, s.svc.Now()))
}

func (s *Server) prepare(c *fiber.Ctx) error {
	var req approval.PrepareCall
	if err := decodeStrict(c, &req); err != nil {
		return s.svc.Refused(c.UserContext(), principal(c), err)
	}
	if h := c.Get("Idempotency-Key"); h != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != h {
			return approval.FieldErrors{{Field: "idempotency_key", Reason: "differs from the Idempotency-Key header"}}.Err()
		}
		req.IdempotencyKey = h
	}
	if req.Action == "" {
		return approval.FieldErrors{{Field: "action", Reason: "required"}}.Err()
	}
	op, created, err := s.svc.Prepare(c.UserContext(), principal(c), req)
	if err != nil {
		return err
	}
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	c.Set(fiber.HeaderLocation, "/v1/operations/"+op.Key)
	return c.Status(status).JSON(s.view(op))
}

func (s *Server) get(c *fiber.Ctx) error {
	wait := 0
	if w := c.Query("wait"); w != "" {
		n, err := strconv.Atoi(w)
		if err != nil || n < 0 || n > 30 {
			return approval.FieldErrors{{Field: "wait", Reason: "must be a whole number of seconds from 0 to 30"}}.Err()
		}
		wait = n
	}
	full := false
	if f := c.Query("full"); f != "" {
		b, err := strconv.ParseBool(f)
		if err != nil {
			return approval.FieldErrors{{Field: "full", Reason: "must be 1 (the whole input) or 0"}}.Err()
		}
		full = b
	}
	op, err := s.svc.Wait(c.UserContext(), principal(c), c.Params("key"), time.Duration(wait)*time.Second)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	if full {
		return c.JSON(approval.AgentView(op, s.svc.Now()))
	}
	return c.JSON(s.view(op))
}

func (s *Server) send(c *fiber.Ctx) error {
	op, err := s.svc.Send(c.UserContext(), principal(c), c.Params("key"))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(s.view(op))
}

func (s *Server) cancel(c *fiber.Ctx) error {
	op, err := s.svc.Cancel(c.UserContext(), principal(c), c.Params("key"))
	if err != nil {
		return err
	}
	return c.JSON(s.view(op))
}

func (s *Server) undo(c *fiber.Ctx) error {
	op, created, err := s.svc.PrepareUndo(c.UserContext(), principal(c), c.Params("key"))
	if err != nil {
		return err
	}
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(s.view(op))
}

func (s *Server) list(c *fiber.Ctx) error {
	ops, err := s.svc.List(c.UserContext(), principal(c), approval.Status(c.Query("status")))
	if err != nil {
		return err
	}
	views := make([]approval.View, len(ops))
	for i, op := range ops {
		views[i] = s.view(op)
	}
	return c.JSON(fiber.Map{"operations": approval.CompactList(views)})
}

func (s *Server) events(c *fiber.Ctx) error {
	evs, err := s.svc.Events(c.UserContext(), principal(c), c.Params("key"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"events": evs})
}

// allowanceCall is the body of POST /v1/allowances: the allowance's
// input, and an optional idempotency key.
type allowanceCall struct {
	Action         string          `json:"action"`
	Match          json.RawMessage `json:"match,omitempty"`
	Budget         json.RawMessage `json:"budget"`
	TTL            json.RawMessage `json:"ttl"`
	Reason         string          `json:"reason"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// requestAllowance asks the approvers for an allowance (SPEC §10): an
// allowance.grant operation, prepared and sent.
func (s *Server) requestAllowance(c *fiber.Ctx) error {
	var req allowanceCall
	if err := decodeStrict(c, &req); err != nil {
		return s.svc.Refused(c.UserContext(), principal(c), err)
	}
	input := map[string]any{"action": req.Action, "budget": req.Budget, "ttl": req.TTL, "reason": req.Reason}
	if len(req.Match) > 0 {
		input["match"] = req.Match
	}
	raw, _ := json.Marshal(input)
	op, created, err := s.svc.RequestAllowance(c.UserContext(), principal(c), raw, req.IdempotencyKey)
	if err != nil {
		return err
	}
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	c.Set(fiber.HeaderLocation, "/v1/operations/"+op.Key)
	return c.Status(status).JSON(s.view(op))
}
