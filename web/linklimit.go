package web

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Failed link attempts are limited per client address (clientAddr:
// COUNTERSIGN_TRUSTED_PROXIES decides whom X-Forwarded-For speaks for).
// Guessing links is pointless (128-bit nonces, HMAC-SHA256), but it should
// be slow and loud.
//
// The limit never locks out a valid link: the signature is checked first
// (approval.Service.OpenLink), and only a link that fails it is counted
// and, past the limit, answered 429. An unforgeable link needs no lockout,
// and one stranger behind the same proxy or NAT must not lock out every
// approver there.

// linkFailWindow is how long failed attempts count.
const linkFailWindow = 10 * time.Minute

func (s *Server) failBucket(c *fiber.Ctx) string { return "link-fail:" + s.clientAddr(c) }

// clientAddr is the request's client address (see proxies.clientAddr).
func (s *Server) clientAddr(c *fiber.Ctx) string { return s.proxies.clientAddr(c) }

// failed counts a failed attempt against the client. Past the limit it
// answers the 429 page instead and reports blocked (the caller returns
// err); a limiter that cannot count (the store is down) is logged and lets
// the attempt's own answer stand.
func (s *Server) failed(c *fiber.Ctx) (blocked bool, err error) {
	if s.cfg.Limiter == nil {
		return false, nil
	}
	ok, wait, lerr := s.cfg.Limiter.Allow(c.UserContext(), s.failBucket(c), s.cfg.LinkFailures, linkFailWindow)
	if lerr != nil {
		s.log.Warn("count failed link attempt", "err", lerr)
		return false, nil
	}
	if ok {
		return false, nil
	}
	secs := int(wait.Seconds()) + 1
	c.Set(fiber.HeaderRetryAfter, fmt.Sprint(secs))
	return true, s.problemPage(c, http.StatusTooManyRequests, "Too many failed attempts",
		fmt.Sprintf("This device tried too many invalid links. Try again in %d seconds; a valid link still opens.", secs))
}
