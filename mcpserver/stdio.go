package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport is MCP over in and out (newline-delimited JSON-RPC) with
// the task layer (SPEC §13) in front of the server: countersign mcp
// answers tasks/get, tasks/result, tasks/list and tasks/cancel over b (the
// REST API), so a task started through the bridge is followed from the
// operation in the service's store, like one started on /mcp. The bridge
// holds no link key, so it asks for no URL elicitation.
// log (may be nil) gets one line per task method call; never stdout.
func StdioTransport(b Backend, in io.ReadCloser, out io.WriteCloser, log *slog.Logger) mcp.Transport {
	return &taskTransport{inner: &mcp.IOTransport{Reader: in, Writer: out}, b: b, log: log}
}

type taskTransport struct {
	inner mcp.Transport
	b     Backend
	log   *slog.Logger
}

func (t *taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &taskConn{Connection: c, b: t.b, layer: &taskLayer{log: t.log}, ctx: cctx, cancel: cancel,
		pending: map[string]func(rpcMsg) rpcMsg{}}, nil
}

// taskConn intercepts the messages of one stdio session.
type taskConn struct {
	mcp.Connection
	b      Backend
	layer  *taskLayer
	ctx    context.Context // ends when the session closes
	cancel context.CancelFunc

	mu      sync.Mutex
	version string                         // from initialize
	pending map[string]func(rpcMsg) rpcMsg // responses to rewrite, by request id
}

func idKey(id jsonrpc.ID) string { return fmt.Sprintf("%T:%v", id.Raw(), id.Raw()) }

// Read hands the server every message but those the task layer answers
// itself; those are answered concurrently (tasks/result may wait long).
func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			return msg, nil
		}
		raw, err := jsonrpc.EncodeMessage(req)
		if err != nil {
			return msg, nil
		}
		c.mu.Lock()
		if req.Method == "initialize" {
			var ip struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(req.Params, &ip)
			c.version = ip.ProtocolVersion
		}
		version := c.version
		c.mu.Unlock()
		ex := c.layer.handle(c.b, nil, raw, version)
		if ex.answer != nil {
			go func() {
				out := ex.answer(c.ctx)
				if out == nil { // only URL elicitation forwards after answering; not offered here
					out = reply(json.RawMessage(mustJSON(req.ID.Raw())), nil, &rpcErr{Code: rpcInternal, Message: "internal error"})
				}
				if m, err := jsonrpc.DecodeMessage(out); err == nil {
					_ = c.Connection.Write(c.ctx, m)
				}
			}()
			continue
		}
		if ex.rewrite != nil {
			c.mu.Lock()
			c.pending[idKey(req.ID)] = ex.rewrite
			c.mu.Unlock()
		}
		if !bytes.Equal(ex.forward, raw) {
			if m, err := jsonrpc.DecodeMessage(ex.forward); err == nil {
				return m, nil
			}
		}
		return msg, nil
	}
}

// Write passes the server's responses through the rewrite their request
// asked for.
func (c *taskConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		rewrite := c.pending[idKey(resp.ID)]
		delete(c.pending, idKey(resp.ID))
		c.mu.Unlock()
		if rewrite != nil {
			if raw, err := jsonrpc.EncodeMessage(resp); err == nil {
				var m rpcMsg
				if json.Unmarshal(raw, &m) == nil {
					if out, err := json.Marshal(rewrite(m)); err == nil {
						if nm, err := jsonrpc.DecodeMessage(out); err == nil {
							msg = nm
						}
					}
				}
			}
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *taskConn) Close() error {
	c.cancel()
	return c.Connection.Close()
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
