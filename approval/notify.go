package approval

import (
	"context"
	"fmt"
	"time"
)

// Notifier reaches humans through one channel (email, console, slack, webhook).
type Notifier interface {
	// Notify delivers one approval request. The returned handle is kept
	// with the operation so that later updates can edit the same message.
	// A *RetryAfterError asks for a retry no sooner than its delay; any
	// other error is retried with backoff.
	Notify(ctx context.Context, n Notice) (map[string]string, error)
}

// Updater is implemented by channels whose messages can be edited in place
// once the operation moves on (Slack).
type Updater interface {
	Update(ctx context.Context, d Delivery, m Message) error
}

// PerApprover is implemented by channels whose shared targets may instead
// want one message per approver, each with its own link (a webhook
// configured to carry links).
type PerApprover interface {
	PerApprover(target string) bool
}

// Notice is one notification to deliver.
type Notice struct {
	Job      Job
	Message  Message
	Approver *Approver // nil for shared targets such as a Slack channel
	// Link is the approval page URL for this approver; empty when the job
	// carries no link. It is a capability: never log it.
	Link string
	// FollowUp, when set, says this notice follows an earlier one: a
	// reminder, or an escalation announced where the first was posted.
	FollowUp *FollowUp
}

// FollowUp is a notice about an operation already announced.
type FollowUp struct {
	// Reminder is the reminder's number; 0 for an escalation.
	Reminder int
	// Original is the first notice of the same job, when it reached its
	// channel (a channel that threads replies answers it there).
	Original *Delivery
}

// RetryAfterError is returned by a notifier that was told to slow down.
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %v", e.After, e.Err)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }
