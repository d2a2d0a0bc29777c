package main

import (
	"net/url"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/gateway"
	"github.com/countersign/countersign/mcpserver"
	"github.com/countersign/countersign/web"
)

// mcpEffects wires /mcp: MCP over streamable HTTP, stateless (any replica
// answers any request, no sticky sessions) with JSON responses, behind the
// same bearer API keys, principals and scopes as the REST API.
//
// It is mounted in fiber through web's bridge, which buffers responses and
// whose request context carries the request's trace but never ends on its
// own; that is why /mcp is stateless, and why get_operation_status's
// long-poll has its own deadline and ends when the service closes
// (Main.Close closes the service first).
func (m *Main) mcpEffects(e *effects, file *config.File, dev bool) error {
	e.extra = append(e.extra, func(svc *approval.Service, m *Main) []web.Mount {
		// Attachments travel in prepare_email: /mcp takes what REST takes.
		maxBody := max(1<<20, int64(file.Settings.MaxRequestBytes)+64<<10)
		h := mcpserver.NewHTTPHandler(svc, &mcpserver.HTTPOptions{
			Options:      mcpserver.Options{Version: buildVersion(), Logger: m.log, Tracer: m.tracing.Provider},
			OnPrincipal:  web.NotePrincipal,
			ResourceURL:  m.PublicURL + "/mcp",
			MaxBodyBytes: maxBody,
			Retention:    time.Duration(file.Settings.Retention),
			Elicitation:  inboxElicitation(file, svc, m),
			Gateway:      e.gatewayFor(svc),
		})
		// RFC 9728 metadata: path-aware, and at the root for clients that
		// look there; both say "a bearer API key, no OAuth".
		meta := mcpserver.ResourceMetadata(m.PublicURL+"/mcp", m.PublicURL+"/")
		// The handler checks the key before it reads the body (at most
		// maxBody; the bridge stops there too).
		return []web.Mount{{Path: "/mcp", HTTP: h, BodyLimit: int(maxBody)},
			{Path: "/.well-known/oauth-protected-resource/mcp", HTTP: meta},
			{Path: "/.well-known/oauth-protected-resource", HTTP: meta}}
	})
	return nil
}

// inboxElicitation is URL elicitation on /mcp (SPEC §13): only where
// approvers sign in (oidc:), since the page it opens, /inbox/{key},
// decides only for the approver signed in there. requestState is keyed
// by the link keyring (every replica computes the same) and redeemed once
// in the store.
func inboxElicitation(file *config.File, svc *approval.Service, m *Main) *mcpserver.Elicitation {
	if file.OIDC == nil {
		return nil
	}
	return &mcpserver.Elicitation{
		InboxURL: func(key string) string { return m.PublicURL + "/inbox/" + url.PathEscape(key) },
		MAC:      func(parts ...string) string { return svc.Links().MAC("mcp-request-state", parts...) },
		Once:     m.Store.Once,
		Now:      svc.Now,
	}
}

// mcpTools answers GET /v1/tools: the tools /mcp lists here, so that the
// stdio bridge (countersign mcp) lists the same.
func mcpTools(svc *approval.Service, gw *gateway.Gateway) func(*approval.Principal) any {
	tools := mcpserver.Tools(&mcpserver.Options{Actions: svc.ActionNames()})
	if gw == nil {
		return func(*approval.Principal) any { return tools }
	}
	return func(p *approval.Principal) any {
		var out []any
		for _, t := range tools {
			out = append(out, t)
		}
		for _, t := range gw.Tools(p) {
			out = append(out, t)
		}
		return out
	}
}
