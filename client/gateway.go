package client

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// GatewayTools lists the upstream MCP servers' tools the principal may
// call (SPEC §12), as GET /v1/tools gives them: the ones named
// NAME__TOOL. None from a service without upstreams.
func (c *Client) GatewayTools(ctx context.Context) ([]*mcp.Tool, error) {
	var out struct {
		Tools []*mcp.Tool `json:"tools"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/tools", nil, nil, 0, &out); err != nil {
		return nil, err
	}
	var gw []*mcp.Tool
	for _, t := range out.Tools {
		if t != nil && strings.Contains(t.Name, "__") {
			gw = append(gw, t)
		}
	}
	return gw, nil
}

// gatewayCallTimeout is the longest an upstream call may take, on top of
// the client's own timeout (the upstream's timeout is at most 10 minutes).
const gatewayCallTimeout = 10 * time.Minute

// CallGateway calls an upstream tool (POST /v1/tools/call): its tools/call
// result, a pass tool's own or a guarded call's pending operation.
func (c *Client) CallGateway(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	var out json.RawMessage
	body := map[string]any{"name": name, "arguments": args}
	if _, err := c.do(ctx, http.MethodPost, "/v1/tools/call", nil, body, gatewayCallTimeout, &out); err != nil {
		return nil, err
	}
	return out, nil
}
