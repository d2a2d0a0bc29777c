package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
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
	Warnings     []string // the other warnings, as sentences
	ExpiresIn    string
	CanDecide    bool
	CSRF         string
	Action       string
	ApproverName string
	Refresh      int
}

// pageHeaders sets the security headers of SPEC §7 on every approval page.
func (s *Server) pageHeaders(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set("X-Robots-Tag", "noindex, nofollow")
	return c.Next()
}

func (s *Server) stylesheet(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "public, max-age=3600")
	c.Type("css", "utf-8")
	return c.Send(templates.Stylesheet())
}

func (s *Server) failBucket(c *fiber.Ctx) string { return "link-fail:" + c.IP() }

// linkRateLimit refuses clients that failed too often: guessing links is
// pointless (128-bit nonces, HMAC), but it should also be slow and loud.
func (s *Server) linkRateLimit(c *fiber.Ctx) error {
	if s.cfg.Limiter == nil {
		return c.Next()
	}
	n, wait, err := s.cfg.Limiter.Count(c.UserContext(), s.failBucket(c))
	if err != nil {
		return err
	}
	if n >= s.cfg.LinkFailures {
		secs := int(wait.Seconds()) + 1
		c.Set(fiber.HeaderRetryAfter, fmt.Sprint(secs))
		return s.problemPage(c, http.StatusTooManyRequests, "Too many failed attempts",
			fmt.Sprintf("This device tried too many invalid links. Try again in %d seconds.", secs))
	}
	return c.Next()
}

// failed counts a failed attempt against the client.
func (s *Server) failed(c *fiber.Ctx) {
	if s.cfg.Limiter != nil {
		if _, _, err := s.cfg.Limiter.Allow(c.UserContext(), s.failBucket(c), s.cfg.LinkFailures, 10*time.Minute); err != nil {
			s.log.Warn("count failed link attempt", "err", err)
		}
	}
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
		s.failed(c)
	}
	return s.renderLink(c, v, "")
}

func (s *Server) decideLink(c *fiber.Ctx) error {
	token := c.Params("token")
	if o := c.Get(fiber.HeaderOrigin); o != "" && o != "null" && o != s.origin {
		s.failed(c)
		return s.problemPage(c, http.StatusForbidden, "Request refused", "This form was submitted from another site.")
	}
	v, err := s.svc.OpenLink(c.UserContext(), token)
	if err != nil {
		return err
	}
	if v.Problem != approval.LinkOK {
		if v.Problem == approval.LinkUnknown {
			s.failed(c)
		}
		return s.renderLink(c, v, "")
	}
	cookie := c.Cookies(s.csrfCookieName())
	form := c.FormValue("_csrf")
	if cookie == "" || form == "" || subtle.ConstantTimeCompare([]byte(form), []byte(s.csrfToken(cookie, v))) != 1 {
		s.failed(c)
		return s.problemPage(c, http.StatusForbidden, "Please try again",
			"This decision could not be verified (the page was stale or cookies are blocked). Open the link again and press the button once more.")
	}
	var approve bool
	switch c.FormValue("decision") {
	case "approve":
		approve = true
	case "reject":
	default:
		return s.problemPage(c, http.StatusBadRequest, "Choose Approve or Reject", "The form did not say which button was pressed.")
	}
	v, res, err := s.svc.DecideByLink(c.UserContext(), token, approve, c.FormValue("reason"))
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

// renderLink renders the page for a link in whatever state it is.
func (s *Server) renderLink(c *fiber.Ctx, v *approval.LinkView, notice string) error {
	now := s.svc.Now()
	d := pageData{M: v.Message}
	if v.Op != nil {
		st := v.Message.Status
		d.StatusLabel, d.StatusClass = statusLabel(st), string(st)
		d.Finished = st.Terminal() || st == approval.StatusExecuting
		switch st {
		case approval.StatusSucceeded:
			d.OutcomeKind = "ok"
		case approval.StatusFailed, approval.StatusRejected, approval.StatusExpired, approval.StatusCanceled:
			d.OutcomeKind = "bad"
		default:
			d.OutcomeKind = "info"
		}
		for _, w := range v.Message.Warnings {
			if w == "irreversible" {
				d.Irreversible = true
			} else {
				d.Warnings = append(d.Warnings, w)
			}
		}
		if v.Message.Status == approval.StatusPending {
			d.ExpiresIn = "in " + human(v.Op.ExpiresAt.Sub(now))
		}
		if !v.Message.Status.Terminal() && v.Message.Status != approval.StatusDraft {
			d.Refresh = 3 // follow it to its outcome, without scripts
		}
	}
	status := http.StatusOK
	switch v.Problem {
	case approval.LinkUnknown:
		return s.problemPage(c, http.StatusNotFound, "This link is not valid",
			"It may be mistyped, cut off, or altered. Nothing was decided. Use the link from your notification exactly as it arrived.")
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
		d.CSRF = s.csrfToken(s.csrfCookie(c), v)
		d.Action = "/a/" + c.Params("token")
		if v.Approver != nil {
			d.ApproverName = v.Approver.DisplayName()
		}
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
		d.CanDecide, d.CSRF, d.Action = false, "", "" // decided: no second form
	}
	if d.CanDecide {
		d.Refresh = 0 // hold still while the person reads and types a reason
	}
	return s.renderPage(c, status, d)
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
	}
	return string(st)
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
