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
	"github.com/countersign/countersign/approval/safetext"
)

var _ approval.Notifier = (*Console)(nil)

// Console writes approval notices to W.
type Console struct {
	mu sync.Mutex
	W  io.Writer
	// Remember keeps, in this process's memory only, the newest link
	// printed for each operation and approver until it expires, so that
	// development mode's waiting page (behind a secret printed on this
	// same terminal) can show it again (Link). Off: nothing is kept.
	Remember bool
	// Now is the clock that ages remembered links (default time.Now).
	Now   func() time.Time
	links map[printed]remembered
}

type printed struct{ op, approver string }

type remembered struct {
	link    string
	expires time.Time
}

// Link returns the newest approval link this console printed for
// approver on operation op and that has not expired, or "". It is a
// capability: only a page opened with the terminal's own secret shows it.
func (c *Console) Link(op, approver string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.links[printed{op, approver}]
	if !ok || !c.now().Before(r.expires) {
		return ""
	}
	return r.link
}

func (c *Console) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// remember records a printed link and forgets the expired ones (c.mu held).
func (c *Console) remember(n approval.Notice) {
	if !c.Remember || n.Link == "" || n.Approver == nil {
		return
	}
	now := c.now()
	for k, r := range c.links {
		if !now.Before(r.expires) {
			delete(c.links, k)
		}
	}
	if c.links == nil {
		c.links = map[printed]remembered{}
	}
	c.links[printed{n.Message.OperationKey, n.Approver.ID}] = remembered{n.Link, n.Message.ExpiresAt}
}

// Notify prints the notice.
func (c *Console) Notify(_ context.Context, n approval.Notice) (map[string]string, error) {
	m := n.Message
	var b strings.Builder
	rule := strings.Repeat("─", 72)
	heading := "APPROVAL NEEDED"
	if f := n.FollowUp; f != nil && f.Reminder > 0 {
		heading = fmt.Sprintf("REMINDER %d: APPROVAL STILL NEEDED (the earlier link no longer works)", f.Reminder)
	} else if len(m.Escalated) > 0 {
		heading = "APPROVAL NEEDED (escalated: nobody decided in time)"
	}
	fmt.Fprintf(&b, "\n%s\n  %s  %s\n%s\n", rule, heading, m.Action, rule)
	// The agent's words, fenced: none of them can start a line of this
	// notice, so none can pass for it.
	head := m.Title
	if m.Summary != "" {
		head += "\n" + m.Summary
	}
	wrapped := false
	for _, l := range safetext.FenceLines(head, 76) {
		b.WriteString("  " + l + "\n")
		wrapped = wrapped || strings.HasPrefix(l, safetext.FenceWrap)
	}
	if wrapped {
		b.WriteString("  (┆ continues a line of the agent's text that was too long)\n")
	}
	who := "anyone on the route"
	if n.Approver != nil {
		who = n.Approver.DisplayName() + " (" + n.Approver.ID + ")"
	}
	fmt.Fprintf(&b, "  approver:    %s\n  requested by: %s", who, m.Requester)
	if m.OnBehalfOf != "" {
		fmt.Fprintf(&b, " on behalf of %s", m.OnBehalfOf)
	}
	fmt.Fprintf(&b, "\n  operation:   %s  (%s)\n  fingerprint: %s\n  expires:     %s\n",
		m.OperationKey, m.Action, m.ShortHash(), m.ExpiresAt.UTC().Format(time.RFC1123))
	for _, w := range m.Warnings {
		fmt.Fprintf(&b, "  warning:     %s\n", w)
	}
	if n.Link != "" {
		fmt.Fprintf(&b, "\n  Review and decide: %s\n", n.Link)
		b.WriteString("  (the only link of this notice; opening it decides nothing: the page shows the whole request, with Approve and Reject)\n")
	}
	b.WriteString(rule + "\n")
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.W, b.String()); err != nil {
		return nil, fmt.Errorf("console: write: %w", err)
	}
	c.remember(n)
	return nil, nil
}
