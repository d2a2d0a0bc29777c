// Package console is the development channel: it prints who must approve
// and the approval link to the service's own terminal. It is the one place
// where a capability is written out on purpose; the agent never sees it.
package console

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
)

var _ approval.Notifier = (*Console)(nil)

// Console writes approval notices to W.
type Console struct {
	mu sync.Mutex
	W  io.Writer
}

// Notify prints the notice.
func (c *Console) Notify(_ context.Context, n approval.Notice) (map[string]string, error) {
	m := n.Message
	var b strings.Builder
	rule := strings.Repeat("─", 72)
	fmt.Fprintf(&b, "\n%s\n  APPROVAL NEEDED  %s\n%s\n", rule, m.Title, rule)
	who := "anyone on the route"
	if n.Approver != nil {
		who = n.Approver.DisplayName() + " (" + n.Approver.ID + ")"
	}
	fmt.Fprintf(&b, "  approver:    %s\n  requested by: %s", who, m.Requester)
	if m.OnBehalfOf != "" {
		fmt.Fprintf(&b, " on behalf of %s", m.OnBehalfOf)
	}
	fmt.Fprintf(&b, "\n  operation:   %s  (%s)\n  payload:     %s\n  expires:     %s\n",
		m.OperationKey, m.Action, m.ShortHash(), m.ExpiresAt.UTC().Format(time.RFC1123))
	for _, w := range m.Warnings {
		fmt.Fprintf(&b, "  warning:     %s\n", w)
	}
	if n.Link != "" {
		fmt.Fprintf(&b, "\n  Review and decide: %s\n", n.Link)
		b.WriteString("  (opening the link decides nothing; the page has Approve and Reject)\n")
	}
	b.WriteString(rule + "\n")
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.W, b.String()); err != nil {
		return nil, fmt.Errorf("console: write: %w", err)
	}
	return nil, nil
}
