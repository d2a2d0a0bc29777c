package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/countersign/countersign/approval/jsonx"
)

type rpcMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcErr         `json:"error,omitempty"`
}

type rpcErr struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *rpcErr) Error() string { return e.Message }

// reqMeta is what the task layer reads of a request's params.
type reqMeta struct {
	Meta map[string]json.RawMessage `json:"_meta"`
}

type clientCaps struct {
	Extensions  map[string]json.RawMessage `json:"extensions"`
	Elicitation *struct {
		URL json.RawMessage `json:"url"`
	} `json:"elicitation"`
}

// caps are the request's own client capabilities (protocol 2026-07-28).
func (m reqMeta) caps() clientCaps {
	var c clientCaps
	if raw, ok := m.Meta[metaClientCaps]; ok {
		_ = json.Unmarshal(raw, &c)
	}
	return c
}

func (m reqMeta) version(header string) string {
	var v string
	if raw, ok := m.Meta[metaProtocolVersion]; ok {
		_ = json.Unmarshal(raw, &v)
	}
	if v == "" {
		v = header
	}
	return v
}

func (c clientCaps) tasks() bool { _, ok := c.Extensions[extTasks]; return ok }

func (c clientCaps) urlElicit() bool { return c.Elicitation != nil && c.Elicitation.URL != nil }

// reply is a JSON-RPC response.
func reply(id json.RawMessage, result any, err *rpcErr) []byte {
	out := map[string]any{"jsonrpc": "2.0", "id": id}
	if err != nil {
		out["error"] = err
	} else {
		out["result"] = result
	}
	b, merr := jsonx.Marshal(out)
	if merr != nil {
		b, _ = jsonx.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": rpcErr{Code: rpcInternal, Message: "internal error"}})
	}
	return b
}

// patchResult edits a successful result as a JSON object.
func patchResult(edit func(map[string]any)) func(rpcMsg) rpcMsg {
	return func(resp rpcMsg) rpcMsg {
		if resp.Error != nil || len(resp.Result) == 0 {
			return resp
		}
		dec := json.NewDecoder(bytes.NewReader(resp.Result))
		dec.UseNumber() // pass numbers through as written
		var obj map[string]any
		if dec.Decode(&obj) != nil || obj == nil {
			return resp
		}
		edit(obj)
		if b, err := jsonx.Marshal(obj); err == nil {
			resp.Result = b
		}
		return resp
	}
}

func child(m map[string]any, name string) map[string]any {
	c, ok := m[name].(map[string]any)
	if !ok {
		c = map[string]any{}
		m[name] = c
	}
	return c
}

func answerNow(id json.RawMessage, result any, err *rpcErr) exchange {
	return exchange{answer: func(context.Context) []byte { return reply(id, result, err) }}
}

// stripParams is m without the named params (the SDK knows none of them).
func stripParams(m rpcMsg, names ...string) []byte {
	var params map[string]json.RawMessage
	if json.Unmarshal(m.Params, &params) == nil {
		for _, n := range names {
			delete(params, n)
		}
		m.Params, _ = jsonx.Marshal(params)
	}
	b, _ := jsonx.Marshal(m)
	return b
}
