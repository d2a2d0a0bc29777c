package web

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/gofiber/fiber/v2"
)

// DefaultRequestTimeout bounds the store calls of one request.
const DefaultRequestTimeout = 3500 * time.Millisecond

// targetTimeout is the longest a target may take to answer (a target's
// timeout is at most 2 minutes): prepare and undo read the target.
const targetTimeout = 2 * time.Minute

// gatewayTimeout is the longest an upstream MCP server's call may take
// (an upstream's timeout is at most 10 minutes).
const gatewayTimeout = 10 * time.Minute

// deadline puts a deadline on the request's context, which every store
// call of the request inherits: with Redis unreachable or stalled, the
// request fails with unavailable (503) in time instead of waiting on the
// client's retries. A long-poll (?wait=S) gets its wait on top; prepare and
// undo, which may read an HTTP target first, get the target's time on top
// (their store calls are bounded by the client's timeouts, and the rate
// check before them fails within about a second).
func (s *Server) deadline(c *fiber.Ctx) error {
	d := s.cfg.RequestTimeout
	if w, err := strconv.Atoi(c.Query("wait")); err == nil && w > 0 && w <= 30 {
		d += time.Duration(w) * time.Second
	}
	if p := c.Path(); c.Method() == fiber.MethodPost && (p == "/v1/operations" || strings.HasSuffix(p, "/undo")) {
		d += targetTimeout
	}
	if c.Method() == fiber.MethodPost && c.Path() == "/v1/tools/call" {
		d += gatewayTimeout
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), d)
	defer cancel()
	c.SetUserContext(ctx)
	return c.Next()
}

// recoverPanic turns a panic in a handler into a 500 that says nothing
// about it, and logs the panic and its stack through the service's
// (redacting) logger, so that a panic value carrying a link leaks nowhere.
// Without it a panic would take the whole process down.
func (s *Server) recoverPanic(c *fiber.Ctx) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		s.log.Error("panic in handler", "route", strings.Clone(c.Route().Path), "path", strings.Clone(c.Path()),
			"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		err = s.internalError(c)
	}()
	return c.Next()
}

// internalError answers 500 without details: a plain page under /a/, the
// contract's error elsewhere.
func (s *Server) internalError(c *fiber.Ctx) error {
	c.Response().Reset()
	if isPage(c) {
		setPageHeaders(c)
		return s.problemPage(c, http.StatusInternalServerError, "Something went wrong",
			"countersign could not show this page. Nothing was decided. Try the link again in a moment.")
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(http.StatusInternalServerError).JSON(fiber.Map{"error": approval.Errorf(approval.CodeInternal, "internal error; it has been logged")})
}

// isPage reports whether the request is for an approval page.
func isPage(c *fiber.Ctx) bool {
	p := c.Path()
	for _, prefix := range pagePrefixes {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}

// pagePrefixes are where people, not programs, are answered: errors
// there are plain pages.
var pagePrefixes = []string{"/a", "/inbox", "/console", "/signin", "/signout", "/enroll"}
