// Package faketeams is a fake of the Microsoft services a Teams bot
// talks to, for tests: one httptest server that is the Entra ID login
// endpoint (client credentials → a signed access token), the Bot
// Framework's OpenID metadata and JWKS (RS256 keys with endorsements), and
// the Bot Connector (conversations and activities, kept and recorded so
// tests read what arrived). It also builds the invoke activities Teams
// sends when someone clicks an Action.Execute, with a real RS256 Bot
// Framework token (see invoke.go).
//
//	fake := faketeams.New(t)
//	conn, _ := teams.NewConnector(teams.ConnectorConfig{ServiceURL: fake.ServiceURL(), LoginURL: fake.LoginURL(),
//		AppID: fake.AppID, Password: fake.Password, TenantID: fake.TenantID})
//	… the code under test posts a card …
//	card := fake.WaitActivity(t, func(a faketeams.Activity) bool { … })
//	req := fake.Invoke(target, fake.ClickOn(card, "approve", faketeams.User{ID: "29:grace"}))
package faketeams

import (
	"encoding/json"
	"fmt"
	"github.com/countersign/countersign/internal/testing/testkit"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/channel/teams/teamscard"
)

// Issuer is the issuer of the Bot Framework's tokens.
const Issuer = "https://api.botframework.com"

// Call is one recorded request.
type Call struct {
	Op     string // "login", "create conversation", "send activity", "update activity", "openid", "keys"
	Method string
	Path   string
	Body   json.RawMessage
	Status int
	At     time.Time
}

// Activity is a card the bot posted, as it stands now.
type Activity struct {
	Conversation string
	ID           string
	// Member is the person of a 1:1 chat; Channel the channel of a post.
	Member, Channel string
	Summary         string
	Card            teamscard.Card
	Raw             json.RawMessage
	// Updates counts the PUTs that replaced it.
	Updates int
}

// Failure is how the fake answers a call it was told to fail.
type Failure struct {
	Status     int
	RetryAfter time.Duration
	// AfterEffect applies the call first, then answers the failure (the
	// post happened, the answer was lost).
	AfterEffect bool
	// Delay holds the call this long before the fake handles it (a slow
	// server; a slow success without Status).
	Delay time.Duration
}

// Server is the fake.
type Server struct {
	srv *httptest.Server
	// AppID, Password and TenantID are the bot's credentials the login
	// endpoint accepts, and the tenant of the people and channels.
	AppID, Password, TenantID string
	// Endorsements are the channels the signing keys are endorsed for.
	Endorsements []string

	mu         sync.Mutex
	calls      []Call
	tokens     map[string]time.Time // issued access token → expiry
	chats      map[string]string    // member → 1:1 conversation id
	activities []*Activity
	fails      map[string][]Failure
	seq        int64
	changed    chan struct{}
	channelKey signingKey // signs the tokens of activities (JWKS)
	loginKey   signingKey // signs access tokens
	rogueKey   signingKey // not in the JWKS
	retired    []signingKey
}

// New starts a fake that stops when t ends.
func New(t testing.TB) *Server {
	n := time.Now().UnixNano()
	s := &Server{AppID: "00000000-0000-4000-8000-00000000a99e", Password: "fake-teams-app-password",
		TenantID: "11111111-1111-4111-8111-111111111111", Endorsements: []string{"msteams"},
		tokens: map[string]time.Time{}, chats: map[string]string{}, fails: map[string][]Failure{},
		changed:    make(chan struct{}),
		channelKey: signingKey{kid: fmt.Sprintf("channel-%x", n), key: poolKey(0)},
		loginKey:   signingKey{kid: fmt.Sprintf("login-%x", n), key: poolKey(1)},
		rogueKey:   signingKey{kid: fmt.Sprintf("rogue-%x", n), key: poolKey(2)},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login/{tenant}/oauth2/v2.0/token", s.login)
	mux.HandleFunc("GET /openid/v1/.well-known/openidconfiguration", s.openid)
	mux.HandleFunc("GET /openid/v1/.well-known/keys", s.keys)
	mux.HandleFunc("POST /connector/v3/conversations", s.createConversation)
	mux.HandleFunc("POST /connector/v3/conversations/{conv}/activities", s.sendActivity)
	mux.HandleFunc("PUT /connector/v3/conversations/{conv}/activities/{id}", s.updateActivity)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// ServiceURL is the Bot Connector's base URL (COUNTERSIGN_TEAMS_API_URL).
func (s *Server) ServiceURL() string { return s.srv.URL + "/connector/" }

// LoginURL is the login endpoint's base URL (COUNTERSIGN_TEAMS_LOGIN_URL).
func (s *Server) LoginURL() string { return s.srv.URL + "/login/" }

// OpenIDURL is the OpenID metadata URL (COUNTERSIGN_TEAMS_OPENID_URL).
func (s *Server) OpenIDURL() string { return s.srv.URL + "/openid/v1/.well-known/openidconfiguration" }

// Env is the environment that points countersign at the fake.
func (s *Server) Env() map[string]string {
	return map[string]string{"TEAMS_APP_ID": s.AppID, "TEAMS_APP_PASSWORD": s.Password, "TEAMS_TENANT_ID": s.TenantID,
		"COUNTERSIGN_TEAMS_API_URL": s.ServiceURL(), "COUNTERSIGN_TEAMS_LOGIN_URL": s.LoginURL(),
		"COUNTERSIGN_TEAMS_OPENID_URL": s.OpenIDURL()}
}

// Fail makes the next n calls of op answer f.
func (s *Server) Fail(op string, n int, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fails[op] = append(s.fails[op], f)
	}
}

// RotateKeys replaces the key that signs activities' tokens; the old one
// leaves the JWKS.
func (s *Server) RotateKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retired = append(s.retired, s.channelKey)
	s.channelKey = signingKey{kid: fmt.Sprintf("channel-%x", time.Now().UnixNano()), key: poolKey(3 + len(s.retired))}
}

// ExpireTokens makes every access token issued so far invalid.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]time.Time{}
}

// Calls returns the recorded calls of the given ops (all when none).
func (s *Server) Calls(ops ...string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if len(ops) == 0 || contains(ops, c.Op) {
			out = append(out, c)
		}
	}
	return out
}

// Activities returns the posted cards, oldest first.
func (s *Server) Activities() []Activity {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Activity, 0, len(s.activities))
	for _, a := range s.activities {
		out = append(out, *a)
	}
	return out
}

// Activity returns one card as it stands now.
func (s *Server) Activity(conversation, id string) (Activity, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.find(conversation, id); a != nil {
		return *a, true
	}
	return Activity{}, false
}

// Wait waits until cond holds, checking after every call, and fails the
// test after timeout.
func (s *Server) Wait(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.WaitChange(t, timeout, "faketeams", what, s.changedCh, cond, s.Summary)
}

// changedCh is the channel closed at the next change.
func (s *Server) changedCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// WaitActivity waits for a posted card that satisfies cond.
func (s *Server) WaitActivity(t testing.TB, what string, cond func(Activity) bool) Activity {
	t.Helper()
	var found Activity
	s.Wait(t, 15*time.Second, what, func() bool {
		for _, a := range s.Activities() {
			if cond(a) {
				found = a
				return true
			}
		}
		return false
	})
	return found
}

// Summary lists the recorded calls as "op(status)".
func (s *Server) Summary() string {
	var parts []string
	for _, c := range s.Calls() {
		parts = append(parts, c.Op+"("+strconv.Itoa(c.Status)+")")
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (s *Server) find(conversation, id string) *Activity {
	for _, a := range s.activities {
		if a.Conversation == conversation && a.ID == id {
			return a
		}
	}
	return nil
}

// begin records a call, takes its planned failure and reports whether to
// answer it now (the failure, before any effect). s.mu is held on return
// when ok; the caller finishes with end.
func (s *Server) begin(op string, r *http.Request) (Call, *Failure) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	c := Call{Op: op, Method: r.Method, Path: r.URL.Path, Body: body, At: time.Now()}
	s.mu.Lock()
	var f *Failure
	if q := s.fails[op]; len(q) > 0 {
		f = &q[0]
		s.fails[op] = q[1:]
	}
	if f != nil && f.Delay > 0 {
		// A slow server: the call lands only after the delay.
		s.mu.Unlock()
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
		}
		s.mu.Lock()
	}
	return c, f
}

// end records the call with its status and wakes waiters. s.mu is held.
func (s *Server) end(c Call, status int) {
	c.Status = status
	s.calls = append(s.calls, c)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// answer writes the answer, or the planned failure instead.
func answer(w http.ResponseWriter, r *http.Request, f *Failure, status int, body any) {
	if f != nil && f.Status != 0 {
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
		}
		status, body = f.Status, map[string]any{"error": map[string]string{"code": "Fake" + strconv.Itoa(f.Status), "message": "faketeams: planned failure"}}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if body != nil {
		_ = json.NewEncoder(w).Encode(body)
	}
}

func failsFirst(f *Failure) bool { return f != nil && f.Status != 0 && !f.AfterEffect }

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	c, f := s.begin("login", r)
	form, _ := url.ParseQuery(string(c.Body))
	switch {
	case failsFirst(f):
		s.end(c, f.Status)
	case r.PathValue("tenant") != s.TenantID && r.PathValue("tenant") != "botframework.com",
		form.Get("grant_type") != "client_credentials", form.Get("scope") != "https://api.botframework.com/.default":
		s.end(c, 400)
		answer(w, r, nil, 400, map[string]any{"error": "invalid_request", "error_description": "AADSTS900144: bad request"})
		return
	case form.Get("client_id") != s.AppID || form.Get("client_secret") != s.Password:
		s.end(c, 401)
		answer(w, r, nil, 401, map[string]any{"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."})
		return
	default:
		exp := time.Now().Add(time.Hour)
		tok := s.loginKey.sign(map[string]any{"aud": "https://api.botframework.com", "iss": "https://sts.windows.net/" + s.TenantID + "/",
			"appid": s.AppID, "exp": exp.Unix(), "iat": time.Now().Unix(), "n": s.seq})
		s.seq++
		s.tokens[tok] = exp
		s.end(c, 200)
		answer(w, r, f, 200, map[string]any{"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": tok})
		return
	}
	answer(w, r, f, 0, nil)
}

func (s *Server) openid(w http.ResponseWriter, r *http.Request) {
	c, f := s.begin("openid", r)
	s.end(c, 200)
	answer(w, r, f, 200, map[string]any{"issuer": Issuer, "authorization_endpoint": "https://invalid.botframework.com",
		"jwks_uri": s.srv.URL + "/openid/v1/.well-known/keys", "id_token_signing_alg_values_supported": []string{"RS256"},
		"token_endpoint_auth_methods_supported": []string{"private_key_jwt"}})
}

func (s *Server) keys(w http.ResponseWriter, r *http.Request) {
	c, f := s.begin("keys", r)
	keys := []any{s.channelKey.public(s.Endorsements), s.loginKey.public(nil)}
	s.end(c, 200)
	answer(w, r, f, 200, map[string]any{"keys": keys})
}

// authorized reports whether the request carries a live token the login
// endpoint issued. s.mu is held.
func (s *Server) authorized(r *http.Request) bool {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	exp, ok := s.tokens[tok]
	return ok && time.Now().Before(exp)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
