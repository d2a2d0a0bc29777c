package console

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

var _ approval.Enroller = (*Console)(nil)

// Enrol prints an approver's passkey enrolment link: like approval links,
// the console channel writes it out on purpose, for development.
func (c *Console) Enrol(_ context.Context, n approval.EnrolmentNotice) (string, error) {
	rule := strings.Repeat("─", 72)
	text := fmt.Sprintf("\n%s\n  PASSKEY ENROLMENT  for %s (%s)\n%s\n  Register a passkey: %s\n  (works once, until %s; opening it changes nothing)\n%s\n",
		rule, n.Approver.DisplayName(), n.Approver.ID, rule, n.Link, n.ExpiresAt.UTC().Format(time.RFC1123), rule)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.W, text); err != nil {
		return "", fmt.Errorf("console: write: %w", err)
	}
	return "console", nil
}
