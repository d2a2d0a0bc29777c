package web

import (
	"time"

	"github.com/gofiber/fiber/v2"
)

// DevMail is the development mailbox that email.send delivers into when no
// SMTP server is configured.
type DevMail interface {
	List() []DevMessage
}

// DevMessage is one message in the development mailbox.
type DevMessage struct {
	ID      string
	At      time.Time
	From    string
	To      []string
	Subject string
	Text    string
	HTML    string
	Raw     string
	// Attachments as sent: name, type, size, digest, and the content
	// itself when it is text (so a developer sees what the recipient gets).
	Attachments []DevAttachment
}

// DevAttachment is one attachment of a DevMessage.
type DevAttachment struct {
	Name, ContentType string
	Bytes             int
	SHA256            string
	Text              string // the content, when it is UTF-8 text of at most 64 KiB
}

func (s *Server) devMailList(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Type("html", "utf-8")
	return s.pages.ExecuteTemplate(c, "devmail", fiber.Map{"Messages": s.cfg.DevMail.List()})
}

func (s *Server) devMailShow(c *fiber.Ctx) error {
	for _, m := range s.cfg.DevMail.List() {
		if m.ID == c.Params("id") {
			c.Set(fiber.HeaderCacheControl, "no-store")
			c.Type("txt", "utf-8")
			return c.SendString(m.Raw)
		}
	}
	return fiber.ErrNotFound
}
