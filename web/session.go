package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/signin"
	"github.com/gofiber/fiber/v2"
)

// Sign-in to the approver inbox and the operator console. A person signs
// in at the OIDC provider (signin.Client); the callback checks the state
// against the browser's own cookie, redeems the code with the PKCE
// verifier and verifies the ID token's nonce, maps the claim to an
// approver and/or an operator, and starts a session: a random cookie
// (HttpOnly, SameSite=Lax, Secure unless the public URL is loopback http),
// stored in Redis by its hash so every replica accepts it, for a short
// fixed time. The session is read only from that cookie: an agent's API
// key never opens /inbox or /console, and nothing of the session is ever
// written to a log or an API response.

// SignIn is the OIDC relying party (signin.Client).
type SignIn interface {
	Start(ctx context.Context, next string) (string, signin.State, error)
	Finish(ctx context.Context, code string, st signin.State) (signin.Identity, error)
}

// Sessions keeps sessions and sign-ins under way (store.Redis).
type Sessions interface {
	PutSession(ctx context.Context, idHash string, data []byte, ttl time.Duration) error
	Session(ctx context.Context, idHash string) ([]byte, error)
	DropSession(ctx context.Context, idHash string) error
	PutSignIn(ctx context.Context, stateHash string, data []byte, ttl time.Duration) error
	TakeSignIn(ctx context.Context, stateHash string) ([]byte, error)
}

// signInTTL bounds a sign-in from the redirect to the callback.
const signInTTL = 10 * time.Minute

// session is one signed-in person.
type session struct {
	Approver string    `json:"a,omitempty"`
	Operator string    `json:"o,omitempty"`
	Name     string    `json:"n,omitempty"`
	Expires  time.Time `json:"x"`
	// hash names the session in the store and derives its CSRF tokens.
	hash string
}

const sessionLocal = "session"

func (s *Server) sessionCookieName() string {
	if s.secure {
		return "__Host-countersign-session"
	}
	return "countersign-session"
}

const signInCookie = "countersign-signin"

func hashHex(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:16])
}

// cookieSecure is whether cookies carry Secure: always, except on a
// loopback http public URL (development, tests).
func (s *Server) cookieSecure() bool { return s.secure }

func (s *Server) setCookie(c *fiber.Ctx, name, value, path string, maxAge time.Duration) {
	c.Cookie(&fiber.Cookie{Name: name, Value: value, Path: path, HTTPOnly: true, Secure: s.cookieSecure(),
		SameSite: fiber.CookieSameSiteLaxMode, MaxAge: int(maxAge / time.Second), Expires: s.svc.Now().Add(maxAge)})
}

func (s *Server) clearCookie(c *fiber.Ctx, name, path string) {
	c.Cookie(&fiber.Cookie{Name: name, Value: "", Path: path, HTTPOnly: true, Secure: s.cookieSecure(),
		SameSite: fiber.CookieSameSiteLaxMode, MaxAge: -1, Expires: time.Unix(0, 0)})
}

// currentSession reads the session of the request's cookie, or nil.
func (s *Server) currentSession(c *fiber.Ctx) (*session, error) {
	v := c.Cookies(s.sessionCookieName())
	if len(v) != 43 || s.cfg.Sessions == nil {
		return nil, nil
	}
	h := hashHex(v)
	raw, err := s.cfg.Sessions.Session(c.UserContext(), h)
	if err != nil || raw == nil {
		return nil, err
	}
	var ss session
	if json.Unmarshal(raw, &ss) != nil || !s.svc.Now().Before(ss.Expires) {
		return nil, nil
	}
	// The policy may have changed since sign-in: a person removed from it
	// keeps nothing.
	if ss.Approver != "" && s.svc.Policy().Approver(ss.Approver) == nil {
		ss.Approver = ""
	}
	if ss.Operator != "" && s.svc.Policy().Operator(ss.Operator) == nil {
		ss.Operator = ""
	}
	ss.hash = h
	return &ss, nil
}

// requireSession loads the session, or sends the browser to sign in.
// want is "approver" or "operator".
func (s *Server) requireSession(want string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if s.cfg.SignIn == nil && s.cfg.Dev == nil {
			return s.problemPage(c, http.StatusNotFound, "Sign-in is not set up",
				"This service has no oidc: block in its policy file, so there is no inbox or console to sign in to.")
		}
		ss, err := s.currentSession(c)
		if err != nil {
			return err
		}
		if ss == nil {
			if c.Method() != fiber.MethodGet {
				return s.problemPage(c, http.StatusForbidden, "Please sign in again",
					"Your sign-in has ended, so nothing was done. Sign in and try once more.")
			}
			return c.Redirect("/signin?next="+url.QueryEscape(c.OriginalURL()), http.StatusSeeOther)
		}
		if (want == "approver" && ss.Approver == "") || (want == "operator" && ss.Operator == "") {
			what := "an approver"
			if want == "operator" {
				what = "an operator"
			}
			return s.problemPage(c, http.StatusForbidden, "Not for you",
				"You are signed in, but the policy file does not name you "+what+", so this page is not open to you.")
		}
		c.Locals(sessionLocal, ss)
		return c.Next()
	}
}

func sessionOf(c *fiber.Ctx) *session { return c.Locals(sessionLocal).(*session) }

// sessionCSRF is the CSRF token of one form of one session.
func (s *Server) sessionCSRF(ss *session, form string) string {
	return s.svc.Links().MAC("session-csrf", ss.hash, form)
}

// checkForm refuses a POST from another site or without the session's
// token for this form: it reports false, having answered.
func (s *Server) checkForm(c *fiber.Ctx, ss *session, form string) (bool, error) {
	if o := c.Get(fiber.HeaderOrigin); o != "" && o != "null" && o != s.origin { // "null": no-referrer pages
		return false, s.problemPage(c, http.StatusForbidden, "Request refused", "This form was submitted from another site.")
	}
	got := postValue(c, "_csrf")
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.sessionCSRF(ss, form))) != 1 {
		return false, s.problemPage(c, http.StatusForbidden, "Please try again",
			"This form could not be verified (the page was stale). Open it again and press the button once more.")
	}
	return true, nil
}

// localNext keeps a sign-in's destination to this site's inbox or console.
func localNext(next string) string {
	for _, p := range []string{"/inbox", "/console"} {
		if next == p || strings.HasPrefix(next, p+"/") || strings.HasPrefix(next, p+"?") {
			if !strings.ContainsAny(next, "\\\r\n") && !strings.HasPrefix(next, "//") {
				return next
			}
		}
	}
	return ""
}

// startSignIn is GET /signin: off to the provider.
func (s *Server) startSignIn(c *fiber.Ctx) error {
	if s.cfg.SignIn == nil && s.cfg.Dev != nil {
		return s.problemPage(c, http.StatusForbidden, "Sign in from the terminal",
			"This service runs in development mode, without a sign-in provider. Open the development sign-in link "+
				"that the service printed on its terminal (it works once; each sign-in prints the next one).")
	}
	if s.cfg.SignIn == nil {
		return s.problemPage(c, http.StatusNotFound, "Sign-in is not set up", "This service has no oidc: block in its policy file.")
	}
	u, st, err := s.cfg.SignIn.Start(c.UserContext(), localNext(c.Query("next")))
	if err != nil {
		s.log.Warn("sign-in: provider unavailable", "err", err)
		return s.problemPage(c, http.StatusServiceUnavailable, "Sign-in is unavailable",
			"The sign-in provider cannot be reached right now. Try again in a minute.")
	}
	raw, _ := json.Marshal(st)
	if err := s.cfg.Sessions.PutSignIn(c.UserContext(), hashHex(st.State), raw, signInTTL); err != nil {
		return err
	}
	s.setCookie(c, signInCookie, st.State, "/signin", signInTTL)
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Redirect(u, http.StatusSeeOther)
}

// finishSignIn is GET /signin/callback?code=…&state=….
func (s *Server) finishSignIn(c *fiber.Ctx) error {
	if s.cfg.SignIn == nil {
		return s.problemPage(c, http.StatusNotFound, "Sign-in is not set up", "This service has no oidc: block in its policy file.")
	}
	state, cookie := c.Query("state"), c.Cookies(signInCookie)
	s.clearCookie(c, signInCookie, "/signin")
	if e := c.Query("error"); e != "" {
		return s.problemPage(c, http.StatusForbidden, "Sign-in did not complete", providerError(e))
	}
	if state == "" || len(state) > 128 || subtle.ConstantTimeCompare([]byte(state), []byte(cookie)) != 1 {
		if blocked, err := s.failed(c); blocked {
			return err
		}
		return s.problemPage(c, http.StatusForbidden, "Sign-in did not complete",
			"This sign-in was not started in this browser, or it took too long. Start again from the inbox or the console.")
	}
	raw, err := s.cfg.Sessions.TakeSignIn(c.UserContext(), hashHex(state))
	if err != nil {
		return err
	}
	var st signin.State
	if raw == nil || json.Unmarshal(raw, &st) != nil {
		return s.problemPage(c, http.StatusForbidden, "Sign-in did not complete",
			"This sign-in was used already or took too long. Start again from the inbox or the console.")
	}
	id, err := s.cfg.SignIn.Finish(c.UserContext(), c.Query("code"), st)
	if err != nil {
		_, _ = s.failed(c)
		s.log.Warn("sign-in refused", "err", err)
		return s.problemPage(c, http.StatusForbidden, "Sign-in did not complete", "The provider's answer could not be verified. Nothing was signed in.")
	}
	who := s.svc.Policy().Identify(id.Value)
	if who.Approver == nil && who.Operator == nil {
		s.log.Info("sign-in of someone not in the policy", "subject", id.Subject)
		return s.problemPage(c, http.StatusForbidden, "Not for you",
			"You signed in, but the policy file names you neither an approver nor an operator. Nothing is open to you here.")
	}
	ss := session{Name: id.Name}
	next := st.Next
	if who.Approver != nil {
		ss.Approver = who.Approver.ID
		if ss.Name == "" {
			ss.Name = who.Approver.DisplayName()
		}
	}
	if who.Operator != nil {
		ss.Operator = who.Operator.ID
		if ss.Name == "" {
			ss.Name = who.Operator.ID
		}
	}
	switch {
	case next != "":
	case ss.Approver != "":
		next = "/inbox"
	default:
		next = "/console"
	}
	return s.startSession(c, ss, next)
}

// startSession stores a new session for ss, lasting SessionTTL, sets its
// cookie and sends the browser to next: the one way a session starts,
// after an OIDC sign-in or development mode's sign-in (dev.go).
func (s *Server) startSession(c *fiber.Ctx, ss session, next string) error {
	ss.Expires = s.svc.Now().Add(s.cfg.SessionTTL)
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	value := base64.RawURLEncoding.EncodeToString(b)
	data, _ := json.Marshal(ss)
	if err := s.cfg.Sessions.PutSession(c.UserContext(), hashHex(value), data, s.cfg.SessionTTL); err != nil {
		return err
	}
	s.setCookie(c, s.sessionCookieName(), value, "/", s.cfg.SessionTTL)
	s.log.Info("signed in", "approver", ss.Approver, "operator", ss.Operator)
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Redirect(next, http.StatusSeeOther)
}

// signOut is POST /signout.
func (s *Server) signOut(c *fiber.Ctx) error {
	ss, err := s.currentSession(c)
	if err != nil {
		return err
	}
	if ss != nil {
		if ok, err := s.checkForm(c, ss, "signout"); !ok {
			return err
		}
		if err := s.cfg.Sessions.DropSession(c.UserContext(), ss.hash); err != nil {
			return err
		}
	}
	s.clearCookie(c, s.sessionCookieName(), "/")
	return s.problemPage(c, http.StatusOK, "Signed out", "You are signed out of countersign on this browser.")
}

// oauthErrors are the error codes a provider may send back to the
// redirect URI (RFC 6749 4.1.2.1, OpenID Connect Core 3.1.2.6).
var oauthErrors = map[string]bool{
	"invalid_request": true, "unauthorized_client": true, "access_denied": true, "unsupported_response_type": true,
	"invalid_scope": true, "server_error": true, "temporarily_unavailable": true, "interaction_required": true,
	"login_required": true, "account_selection_required": true, "consent_required": true, "invalid_request_uri": true,
	"invalid_request_object": true, "request_not_supported": true, "request_uri_not_supported": true,
	"registration_not_supported": true,
}

// providerError is what the page says of a callback that carries an
// error. Its query string is anyone's to write (a link can send a person
// to the callback with any text), so none of it reads as the service's
// words: the sentence is fixed, a standard error code is shown quoted as
// a code, and error_description and any other text are never shown.
func providerError(code string) string {
	if oauthErrors[code] {
		return "The provider ended the sign-in with the error code \u201c" + code + "\u201d. Nothing was signed in."
	}
	return "The provider ended the sign-in with an error (not a standard OAuth error code, so it is not shown). Nothing was signed in."
}

// signedInRoutes serve people who signed in, and passkey enrolment.
func (s *Server) signedInRoutes() {
	app := s.app
	app.Get("/signin", s.pageHeaders, s.startSignIn)
	app.Get("/signin/callback", s.pageHeaders, s.finishSignIn)
	app.Post("/signout", s.pageHeaders, s.signOut)
	inbox := app.Group("/inbox", s.pageHeaders, s.requireSession("approver"))
	inbox.Get("", s.inbox)
	inbox.Get("/:key", s.inboxOp)
	inbox.Post("/:key", s.inboxDecide)
	console := app.Group("/console", s.pageHeaders, s.requireSession("operator"))
	console.Get("", s.console)
	console.Get("/:key", s.consoleOp)
	console.Post("/:key/cancel", s.consoleCancel)
	console.Post("/:key/reconcile", s.consoleReconcile)
	app.Get("/enroll/:token", s.pageHeaders, s.openEnrol)
	app.Post("/enroll/:token", s.pageHeaders, s.finishEnrol)
}
