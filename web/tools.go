package web

import (
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
