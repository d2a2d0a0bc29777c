package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/approval/jcs"
)

// ToolSHA256 is the hex SHA-256 of the JCS (RFC 8785) of the tool's name,
// title, description, inputSchema, outputSchema and annotations (not _meta
// or icons), absent members left out. It returns "" only for a tool that
// cannot be encoded (which a listed tool never is).
func ToolSHA256(t *mcp.Tool) string {
	if t == nil {
		return ""
	}
	v := struct {
		Name         string               `json:"name"`
		Title        string               `json:"title,omitempty"`
		Description  string               `json:"description,omitempty"`
		InputSchema  any                  `json:"inputSchema,omitempty"`
		OutputSchema any                  `json:"outputSchema,omitempty"`
		Annotations  *mcp.ToolAnnotations `json:"annotations,omitempty"`
	}{t.Name, t.Title, t.Description, t.InputSchema, t.OutputSchema, t.Annotations}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:])
}
