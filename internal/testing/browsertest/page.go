package browsertest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Viewport is the device a page emulates, in CSS pixels.
type Viewport struct {
	Width, Height     int
	DeviceScaleFactor float64
	// Mobile turns on the phone layout rules (the meta viewport is
	// honoured, scrollbars overlay the page) and touch emulation.
	Mobile bool
}

// Phone is a common modern phone: 390×844 CSS pixels (iPhone 12–15 size),
// rendered at 2 device pixels per CSS pixel to keep screenshots small.
var Phone = Viewport{Width: 390, Height: 844, DeviceScaleFactor: 2, Mobile: true}

// Desktop is a laptop-sized window.
var Desktop = Viewport{Width: 1280, Height: 900, DeviceScaleFactor: 1}

// Page is one browser tab in a fresh browser context (its own cookies and
// storage, like a private window). Its methods fail the test that opened
// it on any error or timeout; call them from that test's goroutine.
type Page struct {
	t         testing.TB
	b         *Browser
	contextID string
	targetID  string
	sessionID string

	mu     sync.Mutex
	loads  int
	loaded chan struct{} // closed (and replaced) at every load event
	logs   []LogEntry
	docs   []Response
}

// LogEntry is something the page reported: a console message, a browser
// log entry (CSP violations, failed loads, …), an uncaught exception, or
// a DevTools issue.
type LogEntry struct {
	// Source is "console", "exception", "issue", or the Log domain's
	// source ("security", "network", "violation", "javascript", …).
	Source string
	Level  string // "error", "warning", "info", …
	Text   string
	URL    string
}

func (e LogEntry) String() string {
	s := fmt.Sprintf("[%s %s] %s", e.Source, e.Level, e.Text)
	if e.URL != "" {
		s += " (" + e.URL + ")"
	}
	return s
}

// Response is a document (main frame or iframe) the page received.
type Response struct {
	URL      string
	Status   int
	MimeType string
	Headers  map[string]string
}

// NewPage opens a tab for t, emulating vp, and closes it when t ends.
func (b *Browser) NewPage(t testing.TB, vp Viewport) *Page {
	t.Helper()
	p := &Page{t: t, b: b, loaded: make(chan struct{})}
	var bc struct {
		ID string `json:"browserContextId"`
	}
	if err := b.call("Target.createBrowserContext", map[string]any{"disposeOnDetach": true}, &bc); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	p.contextID = bc.ID
	var tg struct {
		ID string `json:"targetId"`
	}
	if err := b.call("Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": bc.ID}, &tg); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	p.targetID = tg.ID
	var at struct {
		ID string `json:"sessionId"`
	}
	if err := b.call("Target.attachToTarget", map[string]any{"targetId": tg.ID, "flatten": true}, &at); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	p.sessionID = at.ID
	b.conn.subscribe(at.ID, p.event)
	t.Cleanup(func() {
		b.conn.subscribe(at.ID, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = b.conn.call(ctx, "", "Target.closeTarget", map[string]any{"targetId": tg.ID}, nil)
		_ = b.conn.call(ctx, "", "Target.disposeBrowserContext", map[string]any{"browserContextId": bc.ID}, nil)
	})
	for _, domain := range []string{"Page", "Runtime", "Log", "Network", "Audits"} {
		p.must(p.Call(domain+".enable", nil, nil))
	}
	p.SetViewport(vp)
	return p
}

// Call sends any CDP command to this page's session, for what the helpers
// do not cover.
func (p *Page) Call(method string, params, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return p.b.conn.call(ctx, p.sessionID, method, params, result)
}

func (p *Page) must(err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatalf("browsertest: %v", err)
	}
}

// event records what the tests look at. It runs on the connection's
// reader goroutine.
func (p *Page) event(method string, params json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch method {
	case "Page.loadEventFired":
		p.loads++
		close(p.loaded)
		p.loaded = make(chan struct{})
	case "Network.responseReceived":
		var e struct {
			Type     string `json:"type"`
			Response struct {
				URL      string            `json:"url"`
				Status   int               `json:"status"`
				MimeType string            `json:"mimeType"`
				Headers  map[string]string `json:"headers"`
			} `json:"response"`
		}
		if json.Unmarshal(params, &e) == nil && e.Type == "Document" {
			r := e.Response
			p.docs = append(p.docs, Response{URL: r.URL, Status: r.Status, MimeType: r.MimeType, Headers: r.Headers})
		}
	case "Runtime.consoleAPICalled":
		var e struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(params, &e) == nil {
			var parts []string
			for _, a := range e.Args {
				if a.Value != nil {
					parts = append(parts, fmt.Sprint(a.Value))
				} else {
					parts = append(parts, a.Description)
				}
			}
			level := e.Type
			if level == "warn" {
				level = "warning"
			}
			p.logs = append(p.logs, LogEntry{Source: "console", Level: level, Text: strings.Join(parts, " ")})
		}
	case "Runtime.exceptionThrown":
		var e struct {
			Details struct {
				Text      string `json:"text"`
				URL       string `json:"url"`
				Exception *struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		if json.Unmarshal(params, &e) == nil {
			text := e.Details.Text
			if e.Details.Exception != nil {
				text += " " + e.Details.Exception.Description
			}
			p.logs = append(p.logs, LogEntry{Source: "exception", Level: "error", Text: text, URL: e.Details.URL})
		}
	case "Log.entryAdded":
		var e struct {
			Entry struct {
				Source string `json:"source"`
				Level  string `json:"level"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		}
		if json.Unmarshal(params, &e) == nil {
			en := e.Entry
			p.logs = append(p.logs, LogEntry{Source: en.Source, Level: en.Level, Text: en.Text, URL: en.URL})
		}
	case "Audits.issueAdded":
		var e struct {
			Issue struct {
				Code    string          `json:"code"`
				Details json.RawMessage `json:"details"`
			} `json:"issue"`
		}
		if json.Unmarshal(params, &e) == nil {
			p.logs = append(p.logs, LogEntry{Source: "issue", Level: "issue", Text: e.Issue.Code + " " + string(e.Issue.Details)})
		}
	}
}

// SetViewport emulates vp from now on.
func (p *Page) SetViewport(vp Viewport) {
	p.t.Helper()
	if vp.DeviceScaleFactor == 0 {
		vp.DeviceScaleFactor = 1
	}
	p.must(p.Call("Emulation.setDeviceMetricsOverride", map[string]any{
		"width": vp.Width, "height": vp.Height, "deviceScaleFactor": vp.DeviceScaleFactor, "mobile": vp.Mobile,
		"screenWidth": vp.Width, "screenHeight": vp.Height,
	}, nil))
	touch := map[string]any{"enabled": vp.Mobile}
	if vp.Mobile {
		touch["maxTouchPoints"] = 5
	}
	p.must(p.Call("Emulation.setTouchEmulationEnabled", touch, nil))
}

func (p *Page) loadCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loads
}

// waitLoad waits for a load event after the n-th.
func (p *Page) waitLoad(n int, what string) {
	p.t.Helper()
	timer := time.NewTimer(loadTimeout)
	defer timer.Stop()
	for {
		p.mu.Lock()
		loads, ch := p.loads, p.loaded
		p.mu.Unlock()
		if loads > n {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			p.t.Fatalf("browsertest: %s: no page load within %v (at %s)", what, loadTimeout, p.url())
		}
	}
}

// Navigate opens url and waits for its load event.
func (p *Page) Navigate(url string) {
	p.t.Helper()
	n := p.loadCount()
	var r struct {
		ErrorText string `json:"errorText"`
	}
	p.must(p.Call("Page.navigate", map[string]any{"url": url}, &r))
	if r.ErrorText != "" {
		p.t.Fatalf("browsertest: navigate to %s: %s", url, r.ErrorText)
	}
	p.waitLoad(n, "navigate to "+url)
}

// Responses returns the documents received so far, oldest first.
func (p *Page) Responses() []Response {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Response(nil), p.docs...)
}

// LastResponse is the latest document received (zero if none).
func (p *Page) LastResponse() Response {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.docs) == 0 {
		return Response{}
	}
	return p.docs[len(p.docs)-1]
}

// Logs returns what the page reported so far.
func (p *Page) Logs() []LogEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]LogEntry(nil), p.logs...)
}

// evaluate runs expr in the page's main frame and returns its value as
// JSON. DevTools evaluation is not subject to the page's CSP.
func (p *Page) evaluate(ctx context.Context, expr string) (json.RawMessage, error) {
	var r struct {
		Result struct {
			Type        string          `json:"type"`
			Value       json.RawMessage `json:"value"`
			Description string          `json:"description"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.b.conn.call(ctx, p.sessionID, "Runtime.evaluate",
		map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r)
	if err != nil {
		return nil, err
	}
	if e := r.Exception; e != nil {
		msg := e.Text
		if e.Exception != nil {
			msg = e.Exception.Description
		}
		return nil, fmt.Errorf("javascript: %s", msg)
	}
	if len(r.Result.Value) == 0 {
		return json.RawMessage("null"), nil
	}
	return r.Result.Value, nil
}

// Eval evaluates the JavaScript expression expr (promises are awaited) and
// decodes its value into out, unless out is nil.
func (p *Page) Eval(expr string, out any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	v, err := p.evaluate(ctx, expr)
	if err != nil {
		p.t.Fatalf("browsertest: eval %s: %v", short(expr), err)
	}
	if out != nil {
		if err := json.Unmarshal(v, out); err != nil {
			p.t.Fatalf("browsertest: eval %s: decode %s: %v", short(expr), v, err)
		}
	}
}

// Bool evaluates expr as a boolean (JavaScript truthiness).
func (p *Page) Bool(expr string) bool {
	p.t.Helper()
	var b bool
	p.Eval("!!("+expr+")", &b)
	return b
}

// WaitFor polls until the expression expr is truthy. Navigations in
// between (meta refresh, redirects) are fine: evaluation errors while a
// document is replaced just mean "not yet".
func (p *Page) WaitFor(expr string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := p.evaluate(ctx, "!!("+expr+")")
		cancel()
		if err == nil && string(v) == "true" {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = "false"
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("browsertest: %s still not true after %v (last: %s) at %s; page text:\n%s",
				short(expr), timeout, last, p.url(), p.textOrError())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Exists reports whether selector matches an element.
func (p *Page) Exists(selector string) bool {
	p.t.Helper()
	return p.Bool("document.querySelector(" + jsString(selector) + ")")
}

// Text is the page's visible text as a reader sees it
// (document.body.innerText: CSS text-transform applies).
func (p *Page) Text() string {
	p.t.Helper()
	var s string
	p.Eval(`document.body ? document.body.innerText : ""`, &s)
	return s
}

// TextContent is the raw text of the first element matching selector
// (textContent: exactly as in the markup), failing if there is none.
func (p *Page) TextContent(selector string) string {
	p.t.Helper()
	var s *string
	p.Eval(`(() => { const el = document.querySelector(`+jsString(selector)+`); return el ? el.textContent : null })()`, &s)
	if s == nil {
		p.t.Fatalf("browsertest: no element matches %s at %s; page text:\n%s", selector, p.url(), p.textOrError())
	}
	return *s
}

// URL is the address of the current document.
func (p *Page) URL() string {
	p.t.Helper()
	return p.url()
}

func (p *Page) url() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := p.evaluate(ctx, "location.href")
	if err != nil {
		return "(unknown: " + err.Error() + ")"
	}
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

func (p *Page) textOrError() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := p.evaluate(ctx, `document.body ? document.body.innerText : ""`)
	if err != nil {
		return "(unavailable: " + err.Error() + ")"
	}
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

// Box is an element's border box in CSS pixels, relative to the viewport.
type Box struct {
	X, Y, Width, Height float64
}

// Box returns the border box of the first element matching selector.
func (p *Page) Box(selector string) Box {
	p.t.Helper()
	var b *Box
	p.Eval(`(() => { const el = document.querySelector(`+jsString(selector)+`); if (!el) return null;
		const r = el.getBoundingClientRect(); return {X: r.left, Y: r.top, Width: r.width, Height: r.height} })()`, &b)
	if b == nil {
		p.t.Fatalf("browsertest: no element matches %s at %s", selector, p.url())
	}
	return *b
}

// Click scrolls the first element matching selector into view and clicks
// its centre with the mouse, as a person would; it fails if the element
// is missing, has no size, or something else covers that point.
func (p *Page) Click(selector string) {
	p.t.Helper()
	var at struct {
		X, Y  float64
		Error string
	}
	p.Eval(`(() => {
		const el = document.querySelector(`+jsString(selector)+`);
		if (!el) return {Error: "no element matches"};
		el.scrollIntoView({block: "center", inline: "center", behavior: "instant"});
		const r = el.getBoundingClientRect();
		if (r.width < 1 || r.height < 1) return {Error: "the element has no size (hidden?)"};
		const x = r.left + r.width / 2, y = r.top + r.height / 2;
		const hit = document.elementFromPoint(x, y);
		if (!hit || (hit !== el && !el.contains(hit)))
			return {Error: "its centre is covered by " + (hit ? hit.outerHTML.slice(0, 160) : "nothing")};
		return {X: x, Y: y};
	})()`, &at)
	if at.Error != "" {
		p.t.Fatalf("browsertest: click %s: %s (at %s)", selector, at.Error, p.url())
	}
	for _, ev := range []map[string]any{
		{"type": "mouseMoved", "x": at.X, "y": at.Y},
		{"type": "mousePressed", "x": at.X, "y": at.Y, "button": "left", "buttons": 1, "clickCount": 1},
		{"type": "mouseReleased", "x": at.X, "y": at.Y, "button": "left", "buttons": 0, "clickCount": 1},
	} {
		p.must(p.Call("Input.dispatchMouseEvent", ev, nil))
	}
}

// ClickAndWait clicks selector and waits for the page it leads to (a form
// submission or a link) to load.
func (p *Page) ClickAndWait(selector string) {
	p.t.Helper()
	n := p.loadCount()
	p.Click(selector)
	p.waitLoad(n, "click "+selector)
}

// Type clicks into the field matching selector and types text, as
// keyboard input (IME-style insertion, so any Unicode works).
func (p *Page) Type(selector, text string) {
	p.t.Helper()
	p.Click(selector)
	p.must(p.Call("Input.insertText", map[string]any{"text": text}, nil))
}

// Screenshot captures a PNG of the viewport or, with fullPage, of the
// whole document.
func (p *Page) Screenshot(fullPage bool) []byte {
	p.t.Helper()
	params := map[string]any{"format": "png", "fromSurface": true}
	if fullPage {
		var m struct {
			Content struct {
				Width  float64 `json:"width"`
				Height float64 `json:"height"`
			} `json:"cssContentSize"`
		}
		p.must(p.Call("Page.getLayoutMetrics", nil, &m))
		params["captureBeyondViewport"] = true
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": m.Content.Width, "height": m.Content.Height, "scale": 1}
	}
	var r struct {
		Data string `json:"data"`
	}
	p.must(p.Call("Page.captureScreenshot", params, &r))
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		p.t.Fatalf("browsertest: screenshot: %v", err)
	}
	return png
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 100 {
		return s[:97] + "..."
	}
	return s
}
