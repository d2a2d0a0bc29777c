package web

import (
	_ "embed"

	"github.com/gofiber/fiber/v2"
)

// OpenAPI is the OpenAPI 3.1 description of the REST and admin APIs
// (SPEC §6), served at GET /openapi.json. It is the one source: the
// end-to-end and client tests validate every response they get against it.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) openAPI(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	c.Type("json", "utf-8")
	return c.Send(OpenAPI)
}
