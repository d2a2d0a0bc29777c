package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/templates"
	"github.com/gofiber/fiber/v2"
)

// The approval page. GET and HEAD only show: mail scanners and link
// previewers open links, and must never decide anything. A decision is a
// POST from the rendered form, carrying a CSRF token bound to both a
// cookie set by the GET and the link itself (double submit, keyed by the
// link key so every replica can check it without shared state).

// pageData is what page.html.tmpl renders.
type pageData struct {
	Headline     string
	Explanation  string
	Notice       string
	NoticeKind   string
	M            approval.Message
	StatusLabel  string
	StatusClass  string // the status, for colour
	OutcomeKind  string // ok, bad or info: how the outcome box looks
	Finished     bool   // the operation ran or ended: past tense
	Irreversible bool
	Warnings     []pageWarning // the other warnings, as sentences with their codes
	ExpiresIn    string
	ExpiresISO   string // the expiry for <time datetime>
	// ExpiresLocal is the expiry in the approver's own time zone, when the
	// policy names one; the page has no script to ask the browser.
	ExpiresLocal string
	CanDecide    bool
	// Edit lists the fields the approver may edit (route allow_edit).
	Edit []approval.EditableField
	// Revoke offers the approver to end an active allowance.
	Revoke       bool
	CSRF         string
	Action       string
	ApproverName string
	Refresh      int
	// PayloadHash, when set, goes back with the form: a decision from
	// the inbox names the payload the person was shown.
	PayloadHash string
	// StepUp is set on a step-up route: the passkey requests of both
	// decisions, for the page's script (web/stepup.go).
	StepUp *stepUpView
	// Nonce lets the page's one script run under the CSP.
	Nonce string
	// Back links to the inbox; SignOut is the sign-out form's token.
	Back    string
	SignOut string
	Brand   string
}

// pageHeaders sets the security headers of SPEC §7 on every approval page
// (the error handler and the panic handler set them on theirs too).
func (s *Server) pageHeaders(c *fiber.Ctx) error {
	setPageHeaders(c)
	return c.Next()
}

func setPageHeaders(c *fiber.Ctx) {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set("X-Robots-Tag", "noindex, nofollow")
}

func (s *Server) stylesheet(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "public, max-age=3600")
	c.Type("css", "utf-8")
	return c.Send(templates.Stylesheet())
}

func (s *Server) csrfCookieName() string {
	if s.secure {
		return "__Host-countersign-csrf"
	}
	return "countersign-csrf"
}

// csrfCookie returns the client's CSRF cookie value, setting one if absent.
func (s *Server) csrfCookie(c *fiber.Ctx) string {
	if v := c.Cookies(s.csrfCookieName()); len(v) >= 22 && len(v) <= 64 {
		return v
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	c.Cookie(&fiber.Cookie{Name: s.csrfCookieName(), Value: v, Path: "/", HTTPOnly: true, Secure: s.secure,
		SameSite: fiber.CookieSameSiteStrictMode})
	return v
}

func (s *Server) csrfToken(cookie string, v *approval.LinkView) string {
	return s.svc.Links().MAC("csrf", cookie, v.NonceHash)
}

func (s *Server) openLink(c *fiber.Ctx) error {
	v, err := s.svc.OpenLink(c.UserContext(), c.Params("token"))
	if err != nil {
		return err
	}
	if v.Problem == approval.LinkUnknown {
		if blocked, err := s.failed(c); blocked {
			return err
		}
	}
	return s.renderLink(c, v, "")
}

func (s *Server) decideLink(c *fiber.Ctx) error {
	token := c.Params("token")
	opened, done, err := s.checkPost(c, token)
	if done {
		return err
	}
	ctx, approve, ok, err := s.decisionForm(c)
	if !ok {
		return err
	}
	v, res, err := s.svc.DecideOpened(ctx, opened, approve, postValue(c, "reason"))
	if refused, rerr := s.refusal(c, err); refused {
		return rerr
	}
	if err != nil {
		return err
	}
	notice := ""
	switch res.Outcome {
	case approval.DecideApproved, approval.DecideRecorded:
		notice = "You approved it."
	case approval.DecideRejected:
		notice = "You rejected it. Nothing will be done."
	}
	if notice == "" {
		return s.renderLink(c, v, "")
	}
	return s.renderLink(c, v, notice)
}

// decisionForm reads a decision form (the page's or the inbox's): the
// button pressed, and the passkey assertion it carries in the context.
// ok false means it answered already.
func (s *Server) decisionForm(c *fiber.Ctx) (ctx context.Context, approve, ok bool, err error) {
	switch postValue(c, "decision") {
	case "approve":
		approve = true
	case "reject":
	default:
		return nil, false, false, s.problemPage(c, http.StatusBadRequest, "Choose Approve or Reject", "The form did not say which button was pressed.")
	}
	if ctx, err = withAssertion(c); err != nil {
		return nil, false, false, err
	}
	return ctx, approve, true, nil
}

// checkPost checks a POST from the page: same origin, a usable link, and
// the CSRF token of its cookie and link. done means it answered already.
func (s *Server) checkPost(c *fiber.Ctx, token string) (*approval.LinkView, bool, error) {
	if o := c.Get(fiber.HeaderOrigin); o != "" && o != "null" && o != s.origin {
		_, _ = s.failed(c) // counted; the refusal stands
		return nil, true, s.problemPage(c, http.StatusForbidden, "Request refused", "This form was submitted from another site.")
	}
	v, err := s.svc.OpenLink(c.UserContext(), token)
	if err != nil {
		return nil, true, err
	}
	if v.Problem != approval.LinkOK {
		if v.Problem == approval.LinkUnknown {
			if blocked, err := s.failed(c); blocked {
				return nil, true, err
			}
		}
		return nil, true, s.renderLink(c, v, "")
	}
	cookie := c.Cookies(s.csrfCookieName())
	form := postValue(c, "_csrf")
	if cookie == "" || form == "" || subtle.ConstantTimeCompare([]byte(form), []byte(s.csrfToken(cookie, v))) != 1 {
		_, _ = s.failed(c) // counted, but a valid link is never locked out: the refusal stands
		return nil, true, s.problemPage(c, http.StatusForbidden, "Please try again",
			"This decision could not be verified (the page was stale or cookies are blocked). Open the link again and press the button once more.")
	}
	return v, false, nil
}

// editLink is an approver's edit from the page: a new version goes to the
// approvers, and the page shows the original, superseded.
func (s *Server) editLink(c *fiber.Ctx) error {
	token := c.Params("token")
	v, done, err := s.checkPost(c, token)
	if done {
		return err
	}
	changes := map[string]string{}
	for _, f := range s.svc.EditableFields(v.Op) {
		if val := formArgs(c).Peek("f_" + f.Name); val != nil {
			changes[f.Name] = strings.ReplaceAll(string(val), "\r\n", "\n")
		}
	}
	v, next, err := s.svc.EditByLink(c.UserContext(), token, changes)
	var refusal *approval.Refusal
	switch {
	case errors.As(err, &refusal):
		return s.problemPage(c, http.StatusConflict, "This edit was not made", refusal.Reason+".")
	case err != nil:
		return err
	case next == nil:
		return s.renderLink(c, v, "")
	}
	return s.renderLink(c, v, "You edited it. The new version ("+next.Key+") was sent for approval to the approvers; "+
		"this version will not run.")
}

// revokeLink is an approver ending an active allowance from its page. The
// link is used (the allowance was decided), so the check is its own: a
// valid link of an approver of the allowance, the page's CSRF token.
func (s *Server) revokeLink(c *fiber.Ctx) error {
	token := c.Params("token")
	if o := c.Get(fiber.HeaderOrigin); o != "" && o != "null" && o != s.origin {
		_, _ = s.failed(c)
		return s.problemPage(c, http.StatusForbidden, "Request refused", "This form was submitted from another site.")
	}
	v, err := s.svc.OpenLink(c.UserContext(), token)
	if err != nil {
		return err
	}
	if v.Op == nil || v.Op.Action != approval.GrantAction || v.Approver == nil {
		if blocked, err := s.failed(c); blocked {
			return err
		}
		return s.renderLink(c, v, "")
	}
	cookie := c.Cookies(s.csrfCookieName())
	form := postValue(c, "_csrf")
	if cookie == "" || form == "" || subtle.ConstantTimeCompare([]byte(form), []byte(s.csrfToken(cookie, v))) != 1 {
		_, _ = s.failed(c)
		return s.problemPage(c, http.StatusForbidden, "Please try again", "This could not be verified. Open the link again and press the button once more.")
	}
	_, err = s.svc.RevokeAllowanceAs(c.UserContext(), v.Op.Key, v.Approver.ID)
	var refusal *approval.Refusal
	if errors.As(err, &refusal) {
		return s.problemPage(c, http.StatusForbidden, "Not revoked", refusal.Reason+".")
	}
	if err != nil {
		return err
	}
	v, _ = s.svc.OpenLink(c.UserContext(), token)
	return s.renderLink(c, v, "You revoked the allowance. It approves nothing more; the agent's next operations go to people again.")
}

// postValue reads a field of the submitted form only, never of the query
// (fiber's FormValue falls back to the query string): what decides comes
// from the page's own form.
func postValue(c *fiber.Ctx, name string) string {
	return string(formArgs(c).Peek(name))
}

// renderLink renders the page for a link in whatever state it is.
func (s *Server) renderLink(c *fiber.Ctx, v *approval.LinkView, notice string) error {
	now := s.svc.Now()
	d := pageData{M: v.Message}
	if v.Op != nil {
		d.describe(v.Message, now)
	}
	status := http.StatusOK
	switch v.Problem {
	case approval.LinkUnknown:
		return s.problemPage(c, http.StatusNotFound, "This link is not valid",
			"It may be mistyped, cut off, or altered. Nothing was decided. Use the link from your notification exactly as it arrived.")
	case approval.LinkReplaced:
		status = http.StatusGone
		d.Headline = "A newer link replaced this one"
		d.Explanation = "A reminder brought you a new link to this request; this older one no longer decides anything. Use the link from the latest message."
	case approval.LinkExpired:
		status = http.StatusGone
		d.Headline = "This request has expired"
		d.Explanation = "The approval window ended before it was decided. Nothing was done and nothing can be decided now."
	case approval.LinkUsed:
		status = http.StatusConflict
		d.Headline = "Your decision is recorded"
		d.Explanation = "This link has been used. Here is where the operation stands."
	case approval.LinkFinished:
		status = http.StatusConflict
		d.Headline = "This request is no longer waiting for a decision"
		d.Explanation = "It was decided or ended already. Here is where it stands."
		if v.Stale != nil || (v.Op != nil && v.Op.Error != nil && v.Op.Error.Code == approval.CodeStaleState) {
			d.Headline = "What this request would change has changed"
			d.Explanation = "The target changed after the agent prepared this request, so it cannot be approved. Nothing was written. The agent has been told to prepare it again."
		}
	case approval.LinkOK:
		d.Headline = "Approve this action?"
		d.Explanation = "An AI agent prepared it. Nothing happens unless you approve."
		d.CanDecide = true
		d.Edit = s.svc.EditableFields(v.Op)
		d.CSRF = s.csrfToken(s.csrfCookie(c), v)
		d.Action = "/a/" + c.Params("token")
		if v.Approver != nil {
			d.ApproverName = v.Approver.DisplayName()
			d.ExpiresLocal = localTime(v.Op.ExpiresAt, v.Approver.TimeZone)
		}
		if err := s.stepUpFor(c, &d, v); err != nil {
			return err
		}
	}
	if op := v.Op; (v.Problem == approval.LinkUsed || v.Problem == approval.LinkFinished) && op != nil &&
		op.Action == approval.GrantAction && op.Status == approval.StatusSucceeded && op.RevokedAt == nil &&
		v.Approver != nil && op.HasApprover(v.Approver.ID) {
		d.Revoke, d.CSRF, d.Action = true, s.csrfToken(s.csrfCookie(c), v), "/a/"+c.Params("token")
	}
	if notice != "" {
		status = http.StatusOK
		d.Notice = notice
		d.NoticeKind = "ok"
		d.Headline = "Thank you"
		d.Explanation = "Your decision is recorded. This page follows the operation to its outcome."
		if v.Message.Status == approval.StatusRejected {
			d.NoticeKind = "bad"
		}
		d.CanDecide, d.CSRF, d.Action, d.Edit, d.StepUp = false, "", "", nil, nil // decided: no second form
	}
	if d.CanDecide {
		d.Refresh = 0 // hold still while the person reads and types a reason
	}
	return s.renderPage(c, status, d)
}

// pageWarning is one warning on the page, with its stable code (the same
// the agent's preview.warning_codes holds) as data-code.
type pageWarning struct{ Code, Text string }

// describe fills in how the page shows m as of now.
func (d *pageData) describe(m approval.Message, now time.Time) {
	st := m.Status
	d.StatusLabel, d.StatusClass = statusLabel(st), string(st)
	d.Finished = st.Terminal() || st == approval.StatusExecuting
	switch st {
	case approval.StatusSucceeded:
		d.OutcomeKind = "ok"
	case approval.StatusFailed, approval.StatusRejected, approval.StatusExpired, approval.StatusCanceled, approval.StatusSuperseded:
		d.OutcomeKind = "bad"
	default:
		d.OutcomeKind = "info"
	}
	for i, w := range m.Warnings {
		code := approval.WarnNotice
		if i < len(m.WarningCodes) {
			code = m.WarningCodes[i]
		}
		if w == "irreversible" {
			d.Irreversible = true
		} else {
			d.Warnings = append(d.Warnings, pageWarning{Code: code, Text: w})
		}
	}
	if st == approval.StatusPending {
		d.ExpiresIn = human(m.ExpiresAt.Sub(now))
		d.ExpiresISO = m.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if !st.Terminal() && st != approval.StatusDraft {
		d.Refresh = 3 // follow it to its outcome, without scripts
	}
}

var (
	previewOnce  sync.Once
	previewPages *htmltemplate.Template
	previewErr   error
)

// RenderPreview writes the approval page of m as an approver who may
// decide sees it (no link, a placeholder form target). The server renders
// the same template; tools and tests use this to look at a message's page
// without a store.
func RenderPreview(w io.Writer, m approval.Message, approver string, now time.Time) error {
	previewOnce.Do(func() { previewPages, previewErr = templates.HTML() })
	if previewErr != nil {
		return previewErr
	}
	d := pageData{M: m, Headline: "Approve this action?", Explanation: "An AI agent prepared it. Nothing happens unless you approve.",
		CanDecide: true, CSRF: "preview", Action: "/a/preview", ApproverName: approver}
	d.describe(m, now)
	d.Refresh = 0
	return previewPages.ExecuteTemplate(w, "page", d)
}

func (s *Server) renderPage(c *fiber.Ctx, status int, d pageData) error {
	c.Status(status)
	c.Type("html", "utf-8")
	if c.Method() == fiber.MethodHead {
		return nil
	}
	return s.pages.ExecuteTemplate(c, "page", d)
}

// problemPage is a plain explanation with the right status, never a trace.
func (s *Server) problemPage(c *fiber.Ctx, status int, headline, explanation string) error {
	return s.renderPage(c, status, pageData{Headline: headline, Explanation: explanation, Notice: "", NoticeKind: "bad"})
}

func statusLabel(st approval.Status) string {
	switch st {
	case approval.StatusPending:
		return "Waiting for approval"
	case approval.StatusApproved:
		return "Approved · about to run"
	case approval.StatusExecuting:
		return "Approved · running"
	case approval.StatusSucceeded:
		return "Done"
	case approval.StatusFailed:
		return "Failed"
	case approval.StatusRejected:
		return "Rejected"
	case approval.StatusExpired:
		return "Expired"
	case approval.StatusCanceled:
		return "Canceled"
	case approval.StatusSuperseded:
		return "Replaced by an edited version"
	}
	return string(st)
}

// localTime is t in the approver's zone, "Tue 1 Dec 11:00 in Europe/Berlin",
// or "" when the policy names no zone for them.
func localTime(t time.Time, zone string) string {
	if zone == "" {
		return ""
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return ""
	}
	return t.In(loc).Format("Mon 2 Jan 15:04") + " your time (" + zone + ")"
}

// human renders a duration for people: "59 minutes", "2 hours".
func human(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "less than a minute"
	case d < 2*time.Minute:
		return "1 minute"
	case d < 2*time.Hour:
		return fmt.Sprintf("%d minutes", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d hours", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}
