package web

import (
	"errors"
	"net/http"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/httpbody"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// Refusing is cheap (SPEC §3 guarantee 14). The server streams request
// bodies: fasthttp reads the headers and at most 8 KiB of a body before a
// handler runs, and the rest only when a handler reads it, through
// httpbody.Read with its own limit. So
//   - gate refuses any Content-Encoding but identity (415) before anything
//     else: no body is ever decompressed;
//   - /v1, /v1/admin and /mcp authenticate from the headers, then read the
//     body (loadBody; the MCP handler through bridge's lazy body);
//   - Slack and Teams check their headers (timestamp, token) first, then
//     read at most their own limit;
//   - pages (approval links, inbox, console, enrolment, sign-out) read
//     their form when a handler first asks for a value (formArgs), which
//     each does only after checking its link or session and CSRF cookie,
//     and at most pageFormLimit (an edit: editFormLimit);
//   - a body no handler read is discarded through a small buffer, or the
//     connection is closed (gate).

// pageFormLimit bounds the form of a page POST (a decision with its reason
// and passkey assertion, a revocation, a passkey enrolment, sign-out).
const pageFormLimit = 128 << 10

// gate comes before every route: it refuses a Content-Encoding (415), and
// once the request is answered, discards what a handler left unread of the
// body (up to 4 × the body limit, through a 4 KiB buffer, within a second)
// or closes the connection, so that a body a little over a limit still
// gets its 413 rather than a reset.
func (s *Server) gate(c *fiber.Ctx) error {
	defer httpbody.Finish(c, 4*s.cfg.BodyLimit)
	if httpbody.CheckEncoding(c) != nil {
		return s.refuseEncoding(c)
	}
	err := c.Next()
	if ferr, ok := c.Locals(formErrLocal).(error); ok && err == nil {
		// A form that could not be read left its handler with empty
		// values, which no page accepts (each needs its CSRF token
		// first): nothing was done, and the answer says why.
		c.Response().Reset()
		return bodyError(ferr)
	}
	return err
}

// refuseEncoding answers 415: invalid_input, details.rule content_encoding
// (a plain page under the pages' paths).
func (s *Server) refuseEncoding(c *fiber.Ctx) error {
	e := approval.Errorf(approval.CodeInvalidInput, "countersign never decompresses a request body: send it without Content-Encoding (or identity)").
		WithDetails(map[string]any{"rule": "content_encoding"})
	if isPage(c) {
		setPageHeaders(c)
		return s.problemPage(c, http.StatusUnsupportedMediaType, "Request refused", e.Message)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(http.StatusUnsupportedMediaType).JSON(fiber.Map{"error": e})
}

// readBody is a middleware that reads the body, at most limit bytes, for
// the handlers after it; it runs after authentication.
func readBody(limit int) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if _, err := httpbody.Read(c, limit); err != nil {
			return bodyError(err)
		}
		return c.Next()
	}
}

// bodyError is the contract's error for a body httpbody.Read refused.
func bodyError(err error) error {
	var tl *httpbody.TooLargeError
	if errors.As(err, &tl) {
		return approval.Errorf(approval.CodePayloadTooLarge, "request body is larger than %d bytes", tl.Limit)
	}
	return approval.Errorf(approval.CodeInvalidInput, "the request body could not be read (cut short or malformed chunks)")
}

// editFormLimit bounds an approver's edit from the page: edited values, in
// form encoding.
func (s *Server) editFormLimit() int { return max(pageFormLimit, 4*s.cfg.BodyLimit) }

// formErrLocal and formLimitLocal carry a page's form reading.
const (
	formErrLocal   = "countersign.form.error"
	formLimitLocal = "countersign.form.limit"
)

// formLimit is a middleware that sets how much of a form a page may read
// (default pageFormLimit).
func formLimit(n int) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.Locals(formLimitLocal, n)
		return c.Next()
	}
}

// formArgs is the submitted form of a page POST, read from the body (at
// most the route's form limit) the first time a handler asks. A body that
// cannot be read gives an empty form, and gate answers payload_too_large
// or invalid_input instead of the handler.
func formArgs(c *fiber.Ctx) *fasthttp.Args {
	limit, ok := c.Locals(formLimitLocal).(int)
	if !ok {
		limit = pageFormLimit
	}
	if _, err := httpbody.Read(c, limit); err != nil {
		c.Locals(formErrLocal, err)
		return &fasthttp.Args{}
	}
	return c.Request().PostArgs()
}
