package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/upstream"
)

// httpUpstream is a real streamable HTTP MCP server (go-sdk) that wants a
// bearer token and sets a cookie on every response.
func httpUpstream(t *testing.T, token string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "http-upstream", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "echo", Description: "Echoes.", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + string(req.Params.Arguments)}}}, nil
		})
	server.AddTool(&mcp.Tool{Name: "flood", Description: "2 MiB.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("f", 2<<20)}}}, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	var cookies atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") != "" {
			cookies.Add(1)
		}
		http.SetCookie(w, &http.Cookie{Name: "track", Value: "me"})
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &cookies
}

func TestHTTPUpstream(t *testing.T) {
	const token = "tok-0123456789"
	srv, cookies := httpUpstream(t, token)
	spec := upstream.Spec{
		Name: "remote", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer " + token},
		MaxResultBytes: 64 << 10, Timeout: 10 * time.Second,
	}
	p := start(t, upstream.Options{}, spec)
	st := status(p, "remote")
	if !st.Up || st.Transport != "http" || st.Tools != 2 {
		t.Fatalf("Status = %+v", st)
	}
	res, err := p.Call(ctxT(t, 10*time.Second), "remote", "echo", []byte(`{"a":1}`), map[string]any{"io.countersign/operation": "op_h"})
	if err != nil || res.Text != `echo {"a":1}` {
		t.Errorf("echo = %+v, %v", res, err)
	}
	res, err = p.Call(ctxT(t, 10*time.Second), "remote", "no_such_tool", nil, nil)
	if err != nil || !res.IsError || res.Text == "" {
		t.Errorf("an unknown tool = %+v, %v; want an isError result", res, err)
	}
	_, err = p.Call(ctxT(t, 10*time.Second), "remote", "flood", nil, nil)
	if !errors.Is(err, upstream.ErrOutcomeUnknown) {
		t.Errorf("flood over the bound: err = %v, want ErrOutcomeUnknown", err)
	}
	if n := cookies.Load(); n != 0 {
		t.Errorf("%d requests carried a cookie", n)
	}
}

func TestHTTPUpstreamRefusedNamesNoHeader(t *testing.T) {
	srv, _ := httpUpstream(t, "the-right-token")
	const wrong = "Bearer wrong-secret-value"
	p := start(t, upstream.Options{}, upstream.Spec{Name: "remote", URL: srv.URL, Headers: map[string]string{"Authorization": wrong}, Timeout: 5 * time.Second})
	st := status(p, "remote")
	if st.Up || st.Error == "" || strings.Contains(st.Error, "wrong-secret-value") {
		t.Errorf("Status = %+v", st)
	}
	_, err := p.Call(ctxT(t, 5*time.Second), "remote", "echo", nil, nil)
	if err == nil || errors.Is(err, upstream.ErrOutcomeUnknown) || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Errorf("Call = %v", err)
	}
}

func TestHTTPUpstreamGoneIsUnavailable(t *testing.T) {
	srv, _ := httpUpstream(t, "tok-abcdef")
	p := start(t, upstream.Options{}, upstream.Spec{Name: "remote", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer tok-abcdef"}, Timeout: 5 * time.Second})
	waitUp(t, p, "remote", 5*time.Second)
	srv.CloseClientConnections()
	srv.Close()
	// Let the client's pool notice its idle connections closed: a request
	// written into one the server closed meanwhile is honestly unknown.
	time.Sleep(300 * time.Millisecond)
	res, err := p.Call(ctxT(t, 10*time.Second), "remote", "echo", nil, nil)
	if approval.ErrorCode(err) != approval.CodeUnavailable || errors.Is(err, upstream.ErrOutcomeUnknown) {
		t.Errorf("Call to a gone server = %+v, %v, want unavailable (nothing was sent)", res, err)
	}
}
