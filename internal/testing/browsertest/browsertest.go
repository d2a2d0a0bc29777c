// Package browsertest drives a real headless Chromium from tests, through
// just enough of the Chrome DevTools Protocol (CDP) to act like a person
// on a phone: open a page at a device size, follow navigations, read what
// is shown, click, type, and take screenshots.
//
//	b := browsertest.Start(t)                  // skips if Chromium is missing
//	p := b.NewPage(t, browsertest.Phone)       // a fresh profile (own cookies)
//	p.Navigate(url)
//	p.Type("#reason", "Wrong invoice")
//	p.ClickAndWait("#reject")                  // waits for the next page
//	p.WaitFor(`document.title.startsWith("Done")`, 15*time.Second)
//	png := p.Screenshot(true)
//
// Chromium is found as $COUNTERSIGN_CHROMIUM, else chromium,
// chromium-browser, google-chrome or google-chrome-stable on $PATH. When
// none is installed, Start skips the test, unless
// COUNTERSIGN_REQUIRE_CHROMIUM is set (CI), where it fails instead.
//
// The browser runs with a new empty profile, no sandbox (tests run as
// root), no GPU, and all background networking off, so it talks to nothing
// but the test's own servers. It is killed, with its child processes, when
// the test ends. Every wait is bounded.
package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Timeouts. Generous: tests run under -race on small, busy machines.
const (
	startTimeout = 30 * time.Second // launch until the DevTools socket answers
	callTimeout  = 15 * time.Second // one CDP command
	loadTimeout  = 20 * time.Second // a navigation until its load event
)

// Flags every launch uses. The background-networking flags matter: a
// closed network refuses Chromium's own update, sync and field-trial
// connections, and we want it to touch nothing but the test's servers.
var launchFlags = []string{
	"--headless",
	"--no-sandbox",
	"--disable-gpu",
	"--disable-quic",
	"--no-first-run",
	"--no-default-browser-check",
	"--disable-background-networking",
	"--disable-component-update",
	"--disable-sync",
	"--disable-extensions",
	"--disable-default-apps",
	"--disable-dev-shm-usage",
	"--disable-breakpad",
	"--disable-crash-reporter",
	"--no-proxy-server",
	"--password-store=basic",
	"--use-mock-keychain",
	"--mute-audio",
	"--hide-scrollbars",
	"--remote-debugging-address=127.0.0.1",
	"--remote-debugging-port=0",
}

// Browser is a headless Chromium started for one test.
type Browser struct {
	conn    *conn
	exe     string
	version string
	output  *tailBuffer
}

// Executable returns the path of the Chromium binary to use, or "" when
// none is installed.
func Executable() string {
	if p := os.Getenv("COUNTERSIGN_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Start launches Chromium for t and stops it when t ends. It skips t when
// Chromium is not installed (fails, when COUNTERSIGN_REQUIRE_CHROMIUM is set).
func Start(t testing.TB) *Browser {
	t.Helper()
	exe := Executable()
	if exe == "" {
		msg := "browsertest: Chromium is not installed (apt-get install -y chromium, or set COUNTERSIGN_CHROMIUM to a Chromium binary)"
		if os.Getenv("COUNTERSIGN_REQUIRE_CHROMIUM") != "" {
			t.Fatal(msg + "; COUNTERSIGN_REQUIRE_CHROMIUM is set")
		}
		t.Skip(msg)
	}
	// Not t.TempDir: Chromium's last writes could race its removal and
	// fail the test; a leftover profile in $TMPDIR is harmless.
	dir, err := os.MkdirTemp("", "browsertest-profile-")
	if err != nil {
		t.Fatal(err)
	}
	b := &Browser{exe: exe, output: &tailBuffer{max: 16 << 10}}
	args := append(append([]string{}, launchFlags...), "--user-data-dir="+dir, "about:blank")
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = b.output, b.output
	cmd.WaitDelay = 5 * time.Second
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("browsertest: start %s: %v", exe, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		if b.conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = b.conn.call(ctx, "", "Browser.close", nil, nil)
			cancel()
			_ = b.conn.close()
		}
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
		}
		killProcessGroup(cmd) // the renderers and helpers too
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("browsertest: Chromium (pid %d) did not exit", cmd.Process.Pid)
		}
		for range 5 {
			if os.RemoveAll(dir) == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	deadline := time.Now().Add(startTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var lastErr error
	for {
		if wsURL, err := devToolsURL(dir); err == nil {
			c, err := dial(ctx, wsURL)
			if err == nil {
				b.conn = c
				break
			}
			lastErr = err
		} else {
			lastErr = err
		}
		select {
		case <-exited:
			t.Fatalf("browsertest: %s exited during start:\n%s", exe, b.output.String())
		case <-ctx.Done():
			t.Fatalf("browsertest: %s did not open its DevTools socket in %v (%v):\n%s", exe, startTimeout, lastErr, b.output.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	var v struct {
		Product string `json:"product"`
	}
	if err := b.conn.call(ctx, "", "Browser.getVersion", nil, &v); err != nil {
		t.Fatalf("browsertest: %v\n%s", err, b.output.String())
	}
	b.version = v.Product
	t.Logf("browsertest: %s (%s)", v.Product, exe)
	return b
}

// devToolsURL reads the browser's websocket URL from DevToolsActivePort,
// which Chromium writes (port, then path) once it listens.
func devToolsURL(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "DevToolsActivePort"))
	if err != nil {
		return "", err
	}
	lines := strings.Fields(string(b))
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "/devtools/browser/") {
		return "", fmt.Errorf("DevToolsActivePort incomplete: %q", b)
	}
	port, err := strconv.Atoi(lines[0])
	if err != nil || port <= 0 || port > 65535 {
		return "", fmt.Errorf("DevToolsActivePort: bad port %q", lines[0])
	}
	return fmt.Sprintf("ws://127.0.0.1:%d%s", port, lines[1]), nil
}

// Version is the browser's product string, e.g. "HeadlessChrome/130.0…".
func (b *Browser) Version() string { return b.version }

// Output is the tail of Chromium's own stdout and stderr, for diagnostics.
func (b *Browser) Output() string { return b.output.String() }

// call runs a browser-level command with the standard timeout.
func (b *Browser) call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return b.conn.call(ctx, "", method, params, result)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if over := w.b.Len() - w.max; over > 0 {
		w.b.Next(over)
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
