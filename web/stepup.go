package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/templates"
	"github.com/gofiber/fiber/v2"
)

// Step-up on the page (SPEC §11). On a route with step_up: passkey the
// decision form carries the passkey request of each decision, and the
// page's one script (served from /static, allowed by a per-response CSP
// nonce, no inline code or handlers) asks the browser for an assertion
// before the form is sent. Every other page has no script at all and
// works without JavaScript. The assertion proves nothing here: the service
// verifies it against the decision's own challenge.

// stepUpView is what the decision form needs on a step-up route.
type stepUpView struct {
	Enrolled bool
	Approve  string // navigator.credentials.get options, JSON
	Reject   string
}

const pageCSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// scriptCSP allows the page's script, by nonce, and nothing else.
func scriptCSP(nonce string) string {
	return "default-src 'none'; script-src 'nonce-" + nonce + "'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}

// withScript lets this response run the page script.
func withScript(c *fiber.Ctx, d *pageData) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	d.Nonce = base64.RawURLEncoding.EncodeToString(b)
	c.Set(fiber.HeaderContentSecurityPolicy, scriptCSP(d.Nonce))
}

// stepUpFor fills in the passkey requests of a decidable operation on a
// step-up route.
func (s *Server) stepUpFor(c *fiber.Ctx, d *pageData, v *approval.LinkView) error {
	if v.Op == nil || v.Op.Route.StepUp == "" {
		return nil
	}
	o, err := s.svc.StepUpOptionsFor(c.UserContext(), v.Op, v.Claims.Approver)
	if err != nil {
		return err
	}
	d.StepUp = &stepUpView{Enrolled: o.Enrolled, Approve: string(o.Approve), Reject: string(o.Reject)}
	if o.Enrolled {
		withScript(c, d)
	}
	return nil
}

// withAssertion carries the form's passkey assertion to the decision.
func withAssertion(c *fiber.Ctx) (context.Context, error) {
	raw := formArgs(c).Peek("assertion")
	if len(raw) > approval.MaxAssertionBytes {
		return nil, approval.Errorf(approval.CodePayloadTooLarge, "the passkey assertion is larger than %d bytes", approval.MaxAssertionBytes)
	}
	return approval.WithPasskeyAssertion(c.UserContext(), append([]byte(nil), raw...)), nil
}

// refusal shows a decision the service refused (a step-up without a valid
// passkey, a person who may not decide) as a plain page.
func (s *Server) refusal(c *fiber.Ctx, err error) (bool, error) {
	var r *approval.Refusal
	if !errors.As(err, &r) {
		return false, nil
	}
	return true, s.problemPage(c, http.StatusForbidden, "Nothing was recorded", capitalize(r.Reason)+".")
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// script serves the page script.
func (s *Server) script(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "public, max-age=3600")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Type("js", "utf-8")
	return c.Send(templates.Script())
}

// enrolData is what enrol.html.tmpl renders.
type enrolData struct {
	Headline, Explanation string
	NoticeKind            string
	Name                  string
	Options               string
	Passkeys              int
	CSRF                  string
	Action                string
	Nonce                 string
	Done                  bool
}

func (s *Server) renderEnrol(c *fiber.Ctx, status int, d enrolData) error {
	c.Status(status)
	c.Type("html", "utf-8")
	if c.Method() == fiber.MethodHead {
		return nil
	}
	return s.pages.ExecuteTemplate(c, "enrol", d)
}

// openEnrol is GET /enroll/{token}: shows the enrolment page, changes nothing.
func (s *Server) openEnrol(c *fiber.Ctx) error {
	v, err := s.svc.OpenEnrolment(c.UserContext(), c.Params("token"))
	if err != nil {
		return err
	}
	return s.showEnrol(c, v, "")
}

func (s *Server) showEnrol(c *fiber.Ctx, v *approval.EnrolView, problem string) error {
	if !v.OK {
		if blocked, err := s.failed(c); blocked {
			return err
		}
		return s.renderEnrol(c, http.StatusNotFound, enrolData{Headline: "This enrolment link is not valid",
			NoticeKind: "bad", Explanation: "It may have been used already, expired, or been altered. Ask an operator for a new one (countersign approvers enroll)."})
	}
	d := enrolData{Headline: "Register a passkey", Name: v.Approver.DisplayName(), Options: string(v.Options), Passkeys: v.Passkeys,
		Explanation: "Some requests need proof that it is really you deciding. Register a passkey (a security key, or your device's screen lock) to approve them.",
		CSRF:        s.svc.Links().MAC("enrol-csrf", s.csrfCookie(c), c.Params("token")), Action: "/enroll/" + c.Params("token")}
	if problem != "" {
		d.Headline, d.NoticeKind, d.Explanation = "The passkey was not registered", "bad", problem
	}
	var pd pageData
	withScript(c, &pd)
	d.Nonce = pd.Nonce
	status := http.StatusOK
	if problem != "" {
		status = http.StatusBadRequest
	}
	return s.renderEnrol(c, status, d)
}

// finishEnrol is POST /enroll/{token}: registers the passkey and uses the link up.
func (s *Server) finishEnrol(c *fiber.Ctx) error {
	token := c.Params("token")
	if o := c.Get(fiber.HeaderOrigin); o != "" && o != "null" && o != s.origin { // "null": no-referrer pages
		return s.problemPage(c, http.StatusForbidden, "Request refused", "This form was submitted from another site.")
	}
	cookie := c.Cookies(s.csrfCookieName())
	want := s.svc.Links().MAC("enrol-csrf", cookie, token)
	if cookie == "" || subtle.ConstantTimeCompare([]byte(postValue(c, "_csrf")), []byte(want)) != 1 {
		return s.problemPage(c, http.StatusForbidden, "Please try again",
			"This form could not be verified (the page was stale or cookies are blocked). Open the link again.")
	}
	v, err := s.svc.FinishEnrolment(c.UserContext(), token, formArgs(c).Peek("credential"))
	var se *approval.StepUpError
	if errors.As(err, &se) {
		return s.showEnrol(c, v, "Your browser's answer was refused: "+se.Reason+". Nothing was stored; try again.")
	}
	if err != nil {
		return err
	}
	if !v.Done {
		return s.showEnrol(c, v, "")
	}
	return s.renderEnrol(c, http.StatusOK, enrolData{Headline: "Your passkey is registered", NoticeKind: "ok", Done: true,
		Name: v.Approver.DisplayName(), Passkeys: v.Passkeys,
		Explanation: "Requests that need a passkey will ask for it on their approval page. This link is used up."})
}
