package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/testkit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
)

// pageEnv is the HTTP edge on a real listener (127.0.0.1:0) over a real
// service and store, with http.request against a real target that counts
// the writes reaching it. Requests can come from chosen loopback
// addresses (127.0.0.2, 127.0.0.3 …), so per-address limits are real.
type pageEnv struct {
	t      *testing.T
	svc    *approval.Service
	srv    *web.Server
	store  *store.Redis
	base   string
	inbox  *pageInbox
	agent  *approval.Principal
	log    *testkit.Buffer
	writes func() int
	// devWaiting and devSignIn are development mode's links (pageOpts.dev).
	devWaiting, devSignIn string
}

const pagePublicURL = "http://countersign.test"

// pageAgentKey is the API key of the page environment's agent.
const pageAgentKey = "cs_page_agent_key_for_tests"

type pageOpts struct {
	linkFailures   int
	trustedProxies []string
	mounts         []web.Mount
	approvers      []string // default: grace
	// dev, when set, opens development mode's doors (web/dev.go).
	dev *web.DevConfig
}

func newPageEnv(t *testing.T, o pageOpts) *pageEnv {
	t.Helper()
	var mu sync.Mutex
	writes := 0
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodGet {
			writes++
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"title": "Standup", "start": "09:00"})
	}))
	t.Cleanup(target.Close)
	a, err := httpreq.New([]httpreq.Target{{Name: "calendar", BaseURL: target.URL, AllowPrivate: true,
		Allow: []httpreq.Rule{{Method: "PATCH", Path: "/events/*"}}, StateFields: []string{"start"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	logs := &testkit.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil)) // plain: web must redact on its own
	st := store.New(redistest.Start(t).Client(t), log)
	t.Cleanup(func() { _ = st.Close() })
	if len(o.approvers) == 0 {
		o.approvers = []string{"grace"}
	}
	var approvers []*approval.Approver
	for _, id := range o.approvers {
		approvers = append(approvers, &approval.Approver{ID: id, Name: strings.ToUpper(id[:1]) + id[1:]})
	}
	agent := &approval.Principal{ID: "agent", Scopes: []string{"http.request"},
		KeyHash: strings.TrimPrefix(approval.SHA256Hex([]byte(pageAgentKey)), "sha256:")}
	inbox := &pageInbox{}
	svc, err := approval.NewService(approval.Config{Store: st, Actions: []approval.Action{a}, Links: approval.RandomKeyring(),
		Notifiers: map[string]approval.Notifier{"console": inbox}, PublicURL: pagePublicURL, Logger: log,
		Policy: &approval.Policy{Principals: []*approval.Principal{agent}, Approvers: approvers,
			Routes: []approval.RouteRule{{ApproverIDs: o.approvers, Required: len(o.approvers), Notify: []string{"console"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var doors *web.DevDoors
	var devWaiting, devSignIn string
	if o.dev != nil {
		doors, devWaiting, devSignIn = web.NewDevDoors(*o.dev, pagePublicURL)
	}
	srv, err := web.New(web.Config{Service: svc, Limiter: st, PublicURL: pagePublicURL, Logger: log,
		LinkFailures: o.linkFailures, TrustedProxies: o.trustedProxies, Mounts: o.mounts, Dev: doors, Sessions: st})
	if err != nil {
		t.Fatal(err)
	}
	base := testkit.Serve(t, srv.App().Listener, srv.Shutdown)
	return &pageEnv{t: t, svc: svc, srv: srv, store: st, base: base, inbox: inbox, agent: agent, log: logs,
		writes: func() int { mu.Lock(); defer mu.Unlock(); return writes }, devWaiting: devWaiting, devSignIn: devSignIn}
}

// pending prepares and sends an operation and returns it with the token
// of each approver's link, in the order of the route's approvers.
func (e *pageEnv) pending(title string) (*approval.Operation, []string) {
	e.t.Helper()
	ctx := context.Background()
	before := len(e.inbox.all())
	op, _, err := e.svc.Prepare(ctx, e.agent, approval.PrepareCall{Action: "http.request",
		Input: json.RawMessage(`{"target":"calendar","method":"PATCH","path":"/events/1","body":{"title":` + quote(title) + `}}`)})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.svc.Send(ctx, e.agent, op.Key); err != nil {
		e.t.Fatal(err)
	}
	if err := e.svc.Reconcile(ctx, op.Ref()); err != nil {
		e.t.Fatal(err)
	}
	var tokens []string
	for _, l := range e.inbox.all()[before:] {
		_, tok, _ := strings.Cut(l, "/a/")
		tokens = append(tokens, tok)
	}
	if len(tokens) == 0 {
		e.t.Fatal("no link was issued")
	}
	return op, tokens
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func (b *pageInbox) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.links...)
}

// status reads the operation as it is stored now.
func (e *pageEnv) status(key string) *approval.Operation {
	e.t.Helper()
	op, err := e.svc.Get(context.Background(), e.agent, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

// client is a browser-like client: it keeps cookies, never follows
// redirects, and connects from a chosen loopback address.
type client struct {
	c *http.Client
}

func newClient(from string) *client {
	jar := &jar{m: map[string][]*http.Cookie{}}
	d := &net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return &client{c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport:     &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type jar struct {
	mu sync.Mutex
	m  map[string][]*http.Cookie
}

func (j *jar) SetCookies(u *url.URL, cs []*http.Cookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.m[u.Hostname()] = append(j.m[u.Hostname()], cs...)
}

func (j *jar) Cookies(u *url.URL) []*http.Cookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.m[u.Hostname()]
}

type response struct {
	status int
	body   string
	header http.Header
}

// do sends a request; hdr adds headers, form makes it a form POST.
func (c *client) do(t *testing.T, method, u string, form url.Values, hdr map[string]string) response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(b), header: resp.Header}
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// open GETs a link page and returns the page and its CSRF token.
func (c *client) open(t *testing.T, e *pageEnv, token string) (response, string) {
	t.Helper()
	r := c.do(t, "GET", e.base+"/a/"+token, nil, nil)
	m := csrfField.FindStringSubmatch(r.body)
	if m == nil {
		return r, ""
	}
	return r, m[1]
}

// assertPageHeaders checks the security headers of SPEC §7.
func assertPageHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	if got := h.Get("Cache-Control"); got != "no-store" {
		t.Errorf("%s: Cache-Control %q", what, got)
	}
	if got := h.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("%s: Referrer-Policy %q", what, got)
	}
	if got := h.Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'none'") {
		t.Errorf("%s: Content-Security-Policy %q", what, got)
	}
	if got := h.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("%s: X-Frame-Options %q", what, got)
	}
}
