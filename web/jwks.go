package web

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// jwks serves the public keys of countersignature receipts (SPEC §9) at
// /.well-known/jwks.json. Targets cache it: it changes only with a
// rotation, and a verifier meeting an unknown kid fetches it again.
func (s *Server) jwks(c *fiber.Ctx) error {
	if s.jwksETag == "" {
		return fiber.ErrNotFound
	}
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	c.Set(fiber.HeaderETag, s.jwksETag)
	c.Set("Access-Control-Allow-Origin", "*") // public keys; browsers may verify too
	for _, m := range strings.Split(c.Get(fiber.HeaderIfNoneMatch), ",") {
		if m = strings.TrimPrefix(strings.TrimSpace(m), "W/"); m == s.jwksETag || m == "*" {
			return c.SendStatus(fiber.StatusNotModified)
		}
	}
	c.Set(fiber.HeaderContentType, "application/jwk-set+json")
	return c.Send(s.cfg.JWKS)
}

// jwksETag is the strong ETag of a JWKS document.
func jwksETag(doc []byte) string {
	if len(doc) == 0 {
		return ""
	}
	h := sha256.Sum256(doc)
	return `"` + hex.EncodeToString(h[:16]) + `"`
}
