package web

import (
	"encoding/json"

	"github.com/countersign/countersign/approval"
	"github.com/gofiber/fiber/v2"
)

// tools is GET /v1/tools: the MCP tools the principal can call here, as
// /mcp lists them (SPEC §12); the stdio bridge lists only these.
func (s *Server) tools(c *fiber.Ctx) error {
	if s.cfg.Tools == nil {
		return approval.Errorf(approval.CodeNotFound, "no such endpoint %s %s", c.Method(), c.Path())
	}
	return c.JSON(fiber.Map{"tools": s.cfg.Tools(principal(c))})
}

// toolCall is POST /v1/tools/call: an upstream MCP server's tool, called
// for a REST agent or the stdio bridge (SPEC §12). The answer is the
// tools/call result /mcp would give: a pass tool's own result, or a
// guarded call's pending operation (202).
func (s *Server) toolCall(c *fiber.Ctx) error {
	if s.cfg.CallTool == nil {
		return approval.Errorf(approval.CodeNotFound, "no upstream MCP servers are configured here")
	}
	var req struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := decodeStrict(c, &req); err != nil {
		return s.svc.Refused(c.UserContext(), principal(c), err)
	}
	if req.Name == "" {
		return s.svc.Refused(c.UserContext(), principal(c), approval.FieldErrors{{Field: "name", Reason: "required: the tool's name as GET /v1/tools lists it (NAME__TOOL)"}}.Err())
	}
	res, err := s.cfg.CallTool(c.UserContext(), principal(c), req.Name, req.Arguments)
	if err != nil {
		return err
	}
	status := fiber.StatusOK
	var probe struct {
		StructuredContent struct {
			OperationKey string `json:"operation_key"`
		} `json:"structuredContent"`
	}
	if json.Unmarshal(res, &probe) == nil && probe.StructuredContent.OperationKey != "" {
		status = fiber.StatusAccepted
		c.Set(fiber.HeaderLocation, "/v1/operations/"+probe.StructuredContent.OperationKey)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Status(status).Send(res)
}
