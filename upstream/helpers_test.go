package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/mcpupstream"
	"github.com/countersign/countersign/upstream"
)

// logBuf collects JSON log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(l.b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// hostileDir is the files of one hostile upstream: notes, the execution
// log and the definitions file.
type hostileDir struct {
	dir, log, defs string
}

func hostile(t *testing.T, name string, flags ...string) (upstream.Spec, hostileDir) {
	t.Helper()
	d := t.TempDir()
	h := hostileDir{dir: d, log: filepath.Join(d, "executions.log"), defs: filepath.Join(d, "defs.json")}
	if err := os.WriteFile(h.defs, []byte("[]"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := append([]string{mcpupstream.Build(t), "-dir", d, "-log", h.log, "-defs", h.defs}, flags...)
	return upstream.Spec{Name: name, Command: cmd, Timeout: 10 * time.Second}, h
}

func (h hostileDir) executions(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(h.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for line := range strings.Lines(string(b)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("execution line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// start starts a pool and waits (bounded) until every upstream was tried.
func start(t *testing.T, opts upstream.Options, specs ...upstream.Spec) *upstream.Pool {
	t.Helper()
	p := upstream.New(specs, opts)
	p.Start(context.Background())
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitListed(ctx); err != nil {
		t.Fatalf("WaitListed: %v", err)
	}
	return p
}

// waitUp waits until the named upstream is up (bounded).
func waitUp(t *testing.T, p *upstream.Pool, name string, within time.Duration) upstream.Status {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, st := range p.Status() {
			if st.Name == name && st.Up {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream %s not up within %v: %+v", name, within, p.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRestarted waits until the upstream was restarted more than
// restarts times and is up again (bounded).
func waitRestarted(t *testing.T, p *upstream.Pool, name string, restarts int, within time.Duration) upstream.Status {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if st := status(p, name); st.Up && st.Restarts > restarts {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream %s not restarted within %v: %+v", name, within, p.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func status(p *upstream.Pool, name string) upstream.Status {
	for _, st := range p.Status() {
		if st.Name == name {
			return st
		}
	}
	return upstream.Status{}
}

func mustTool(t *testing.T, p *upstream.Pool, up, name string) upstream.Tool {
	t.Helper()
	tool, ok, err := p.Lookup(up, name)
	if err != nil || !ok {
		t.Fatalf("Lookup(%s, %s) = ok %v, err %v", up, name, ok, err)
	}
	return tool
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func slogJSON(w *logBuf) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }
