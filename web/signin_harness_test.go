package web_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"log/slog"
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
	"github.com/countersign/countersign/internal/testing/oidctest"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/testkit"
	"github.com/countersign/countersign/passkey"
	"github.com/countersign/countersign/signin"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/web"
)

// signinEnv is the HTTP edge with OIDC sign-in against a real provider
// running in-process (internal/testing/oidctest, RS256 ID tokens), passkeys, and
// two routes over http.request: target "calendar" (plain) and target
// "billing" (step_up: passkey). grace and ada approve both; oncall is an
// operator; the agent works on behalf of sam, who may not approve his own.
type signinEnv struct {
	t        *testing.T
	svc      *approval.Service
	store    *store.Redis
	idp      *oidctest.Provider
	base     string
	log      *testkit.Buffer
	notes    *notes
	agent    *approval.Principal
	agentKey string
}

const signinPublicURL = "https://countersign.test"

// notes is a channel that keeps approval and enrolment links.
type notes struct {
	mu     sync.Mutex
	links  []string
	enrols []string
}

func (n *notes) Notify(_ context.Context, no approval.Notice) (map[string]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if no.Link != "" {
		n.links = append(n.links, no.Link)
	}
	return nil, nil
}

func (n *notes) Enrol(_ context.Context, no approval.EnrolmentNotice) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.enrols = append(n.enrols, no.Link)
	return "console", nil
}

func (n *notes) lastEnrol() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.enrols) == 0 {
		return ""
	}
	return n.enrols[len(n.enrols)-1]
}

func newSigninEnv(t *testing.T) *signinEnv {
	t.Helper()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"title": "Standup", "amount": 10})
	}))
	t.Cleanup(target.Close)
	a, err := httpreq.New([]httpreq.Target{
		{Name: "calendar", BaseURL: target.URL, AllowPrivate: true, Allow: []httpreq.Rule{{Method: "PATCH", Path: "/events/*"}}},
		{Name: "billing", BaseURL: target.URL, AllowPrivate: true, Allow: []httpreq.Rule{{Method: "PATCH", Path: "/invoices/*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	logs := &testkit.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	st := store.New(redistest.Start(t).Client(t), log)
	t.Cleanup(func() { _ = st.Close() })
	agentKey := "cs_agent_key_for_signin_tests"
	agent := &approval.Principal{ID: "agent", Scopes: []string{"http.request"}, OnBehalfOf: "sam",
		KeyHash: strings.TrimPrefix(approval.SHA256Hex([]byte(agentKey)), "sha256:")}
	n := &notes{}
	rp, err := passkey.New(signinPublicURL)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := approval.NewService(approval.Config{Store: st, Actions: []approval.Action{a}, Links: approval.RandomKeyring(),
		Notifiers: map[string]approval.Notifier{"console": n}, PublicURL: signinPublicURL, Logger: log, Passkeys: rp,
		Policy: &approval.Policy{SignInClaim: "email", Principals: []*approval.Principal{agent},
			Approvers: []*approval.Approver{{ID: "grace", Name: "Grace", Email: "grace@example.com"},
				{ID: "ada", Name: "Ada", Email: "ada@example.com"}, {ID: "sam", Name: "Sam", Email: "sam@example.com"}},
			Operators: []*approval.Operator{{ID: "oncall", KeyHash: "y", Email: "oncall@example.com"},
				{ID: "kdesk", KeyHash: "z", Email: "kdesk@example.com"}},
			Routes: []approval.RouteRule{
				{Name: "billing", Match: approval.Match{Target: "billing"}, ApproverIDs: []string{"grace", "ada", "sam"}, Required: 1,
					Notify: []string{"console"}, ForbidSelfApproval: true, StepUp: approval.StepUpPasskey},
				{Name: "calendar", ApproverIDs: []string{"grace", "ada", "sam"}, Required: 1, Notify: []string{"console"}, ForbidSelfApproval: true},
			}}})
	if err != nil {
		t.Fatal(err)
	}
	idp := oidctest.Start(t, "countersign", "idp-secret")
	idp.AllowRedirects(signinPublicURL + "/signin/callback")
	sc, err := signin.New(signin.Config{Issuer: idp.Issuer(), ClientID: "countersign", ClientSecret: "idp-secret",
		RedirectURL: signinPublicURL + "/signin/callback"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{Service: svc, Limiter: st, PublicURL: signinPublicURL, Logger: log,
		SignIn: sc, Sessions: st, SessionTTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	base := testkit.Serve(t, srv.App().Listener, srv.Shutdown)
	return &signinEnv{t: t, svc: svc, store: st, idp: idp, base: base, log: logs, notes: n,
		agent: agent, agentKey: agentKey}
}

// pending prepares and sends a PATCH to target and returns it.
func (e *signinEnv) pending(target, title string) *approval.Operation {
	e.t.Helper()
	ctx := context.Background()
	path := "/events/1"
	if target == "billing" {
		path = "/invoices/1"
	}
	op, _, err := e.svc.Prepare(ctx, e.agent, approval.PrepareCall{Action: "http.request",
		Input: json.RawMessage(`{"target":"` + target + `","method":"PATCH","path":"` + path + `","body":{"title":` + quote(title) + `}}`)})
	if err != nil {
		e.t.Fatal(err)
	}
	if op, err = e.svc.Send(ctx, e.agent, op.Key); err != nil {
		e.t.Fatal(err)
	}
	if err := e.svc.Reconcile(ctx, op.Ref()); err != nil {
		e.t.Fatal(err)
	}
	return op
}

func (e *signinEnv) op(key string) *approval.Operation {
	e.t.Helper()
	op, err := e.svc.Get(context.Background(), nil, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

func (e *signinEnv) events(key string) []approval.Event {
	e.t.Helper()
	evs, err := e.svc.Events(context.Background(), nil, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// person is a browser: it keeps cookies by name (a new value replaces
// the old, an expired one removes it) and follows no redirects.
type person struct {
	*client
	jar *nameJar
}

type nameJar struct {
	mu sync.Mutex
	m  map[string]*http.Cookie
}

func (j *nameJar) SetCookies(_ *url.URL, cs []*http.Cookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range cs {
		if c.MaxAge < 0 || c.Value == "" {
			delete(j.m, c.Name)
			continue
		}
		j.m[c.Name] = c
	}
}

func (j *nameJar) Cookies(*url.URL) []*http.Cookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*http.Cookie
	for _, c := range j.m {
		out = append(out, &http.Cookie{Name: c.Name, Value: c.Value})
	}
	return out
}

func newPerson() *person {
	j := &nameJar{m: map[string]*http.Cookie{}}
	return &person{client: &client{c: &http.Client{Jar: j, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, jar: j}
}

func (p *person) cookie(name string) *http.Cookie {
	p.jar.mu.Lock()
	defer p.jar.mu.Unlock()
	return p.jar.m[name]
}

// signIn signs in as whoever has these claims at the provider, as a
// browser goes: countersign → provider → countersign's callback.
func (e *signinEnv) signIn(p *person, claims map[string]any, next string) response {
	e.t.Helper()
	e.idp.SignIn(claims)
	r := p.do(e.t, "GET", e.base+"/signin?next="+url.QueryEscape(next), nil, nil)
	if r.status != http.StatusSeeOther {
		e.t.Fatalf("GET /signin: %d %s", r.status, r.body)
	}
	r = p.do(e.t, "GET", r.header.Get("Location"), nil, nil) // the provider
	if r.status != http.StatusFound {
		e.t.Fatalf("authorize: %d %s", r.status, r.body)
	}
	back, err := url.Parse(r.header.Get("Location"))
	if err != nil || !strings.HasPrefix(back.String(), signinPublicURL+"/signin/callback?") {
		e.t.Fatalf("the provider sent the browser to %s", back)
	}
	return p.do(e.t, "GET", e.base+back.Path+"?"+back.RawQuery, nil, nil)
}

var (
	formAction  = regexp.MustCompile(`action="([^"]+)"`)
	payloadHash = regexp.MustCompile(`name="payload_hash" value="([^"]+)"`)
	dataAttr    = func(name string) *regexp.Regexp { return regexp.MustCompile(`data-` + name + `="([^"]+)"`) }
)

// formOf reads a page's decision form: CSRF token and payload hash.
func formOf(t *testing.T, body string) (csrf, hash string) {
	t.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form on the page:\n%s", body)
	}
	csrf = m[1]
	if h := payloadHash.FindStringSubmatch(body); h != nil {
		hash = html.UnescapeString(h[1])
	}
	return html.UnescapeString(csrf), hash
}

// challengeOf reads the challenge of a data-… passkey request on a page.
func challengeOf(t *testing.T, body, attr string) []byte {
	t.Helper()
	m := dataAttr(attr).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no data-%s on the page", attr)
	}
	var o struct {
		PublicKey struct {
			Challenge string `json:"challenge"`
			User      struct {
				ID string `json:"id"`
			} `json:"user"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &o); err != nil {
		t.Fatal(err)
	}
	ch, err := base64.RawURLEncoding.DecodeString(o.PublicKey.Challenge)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
