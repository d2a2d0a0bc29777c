package main

import (
	"context"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/mcpserver"
	"github.com/countersign/countersign/web"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
)

// mcpEffects wires /mcp: MCP over streamable HTTP, stateless (any replica
// answers any request, no sticky sessions) with JSON responses, behind the
// same bearer API keys, principals and scopes as the REST API.
//
// It is mounted in fiber through the adaptor, which buffers responses and
// whose request context only ends at server shutdown; that is why /mcp is
// stateless, and why get_operation_status's long-poll has its own deadline
// and ends when the service closes (Main.Close closes the service first).
func (m *Main) mcpEffects(e *effects, file *config.File, dev bool) error {
	rate := file.Settings.APIRate
	if rate == 0 {
		rate = web.DefaultAPIRate
	}
	e.extra = append(e.extra, func(svc *approval.Service, m *Main) []web.Mount {
		h := mcpserver.NewHTTPHandler(svc, &mcpserver.HTTPOptions{
			Options: mcpserver.Options{Version: buildVersion(), Logger: m.log},
			// The same budget as the REST API, so MCP is not a way around it.
			Limit: func(ctx context.Context, p *approval.Principal) error {
				return web.CheckRate(ctx, m.Store, p, rate)
			},
		})
		return []web.Mount{{Path: "/mcp", Handler: adaptor.HTTPHandler(h)}}
	})
	return nil
}
