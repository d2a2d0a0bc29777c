package approval

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Message is the channel-neutral text about one operation, built once and
// adapted by each channel (email, Slack, console, the approval page), so
// that every human sees the same preview the agent saw.
type Message struct {
	OperationKey string
	Action       string
	Title        string
	Summary      string
	Fields       []Field
	Diff         []Change
	Warnings     []string
	Requester    string // principal id
	OnBehalfOf   string // display name of the human the agent acts for
	PayloadHash  string
	ExpiresAt    time.Time
	Required     int
	Status       Status
	Approvals    []DecisionView
	Rejection    *DecisionView
	// Stale lists what changed on the target since prepare (before = what
	// the preview showed, after = now) when the operation failed stale_state.
	Stale []Change
	// Outcome is one plain sentence about where the operation stands.
	Outcome string
}

// DecisionView is a decision with the approver's display name.
type DecisionView struct {
	Approver string
	Name     string
	Via      string
	At       time.Time
	Reason   string
}

// ShortHash is the payload hash prefix shown to humans ("sha256:3f9a1c0d2b7e").
func (m Message) ShortHash() string { return ShortHash(m.PayloadHash) }

// ShortHash shortens a "sha256:…" hash to its first 12 hex digits.
func ShortHash(h string) string {
	if len(h) > len("sha256:")+12 {
		return h[:len("sha256:")+12]
	}
	return h
}

// BuildMessage renders op for humans as of now.
func BuildMessage(op *Operation, p *Policy, now time.Time) Message {
	m := Message{
		OperationKey: op.Key, Action: op.Action,
		Title: op.Preview.Title, Summary: op.Preview.Summary,
		Fields: op.Preview.Fields, Diff: op.Preview.Diff, Warnings: op.Preview.Warnings,
		Requester: op.Principal, PayloadHash: op.PayloadHash, ExpiresAt: op.ExpiresAt,
		Required: op.Route.Required, Status: op.EffectiveStatus(now),
	}
	if op.OnBehalfOf != "" {
		m.OnBehalfOf = op.OnBehalfOf
		if a := p.Approver(op.OnBehalfOf); a != nil {
			m.OnBehalfOf = a.DisplayName()
		}
	}
	view := func(d Decision) DecisionView {
		v := DecisionView{Approver: d.Approver, Name: d.Approver, Via: d.Via, At: d.At, Reason: d.Reason}
		if a := p.Approver(d.Approver); a != nil {
			v.Name = a.DisplayName()
		}
		return v
	}
	for _, d := range op.Approvals {
		m.Approvals = append(m.Approvals, view(d))
	}
	if op.Rejection != nil {
		r := view(*op.Rejection)
		m.Rejection = &r
	}
	if op.Error != nil && op.Error.Code == CodeStaleState {
		m.Stale = StaleChanges(op.Error)
	}
	m.Outcome = outcome(op, m)
	return m
}

// StaleChanges reads the fields that changed from a stale_state error's
// details.changed ([{field, before, after}]), as the action reported them
// or as read back from the store.
func StaleChanges(e *OpError) []Change {
	if e == nil || e.Details["changed"] == nil {
		return nil
	}
	raw, err := json.Marshal(e.Details["changed"])
	if err != nil {
		return nil
	}
	var cs []Change
	if json.Unmarshal(raw, &cs) != nil {
		return nil
	}
	return cs
}

func outcome(op *Operation, m Message) string {
	names := func() string {
		var n []string
		for _, a := range m.Approvals {
			n = append(n, fmt.Sprintf("%s (%s)", a.Name, a.Via))
		}
		return strings.Join(n, ", ")
	}
	switch m.Status {
	case StatusDraft:
		return "Draft: not yet sent for approval."
	case StatusPending:
		if len(m.Approvals) > 0 {
			return fmt.Sprintf("Waiting for approval: %d of %d approvals so far (%s).", len(m.Approvals), m.Required, names())
		}
		return fmt.Sprintf("Waiting for approval (%d required).", m.Required)
	case StatusApproved:
		return "Approved by " + names() + ". Waiting to run."
	case StatusExecuting:
		return "Approved by " + names() + ". Running now."
	case StatusSucceeded:
		return "Approved by " + names() + ". Done: it ran successfully."
	case StatusFailed:
		if op.Error != nil && op.Error.Code == CodeStaleState && len(m.Approvals) == 0 {
			return "Not approved and not run: what it would change has changed since it was prepared. Nothing was written; the agent must prepare it again."
		}
		msg := "Approved by " + names() + ". It failed"
		if op.Error != nil {
			msg += ": " + op.Error.Message
		}
		return msg + "."
	case StatusRejected:
		if r := m.Rejection; r != nil {
			s := fmt.Sprintf("Rejected by %s (%s).", r.Name, r.Via)
			if r.Reason != "" {
				s += " Reason: " + r.Reason
			}
			return s
		}
		return "Rejected."
	case StatusExpired:
		if len(m.Approvals) >= m.Required && m.Required > 0 {
			return "Expired: approved by " + names() + ", but it could not run before the approval window ended (writes were turned off). Nothing was done."
		}
		if op.SentAt == nil {
			return "Expired as a draft: it was never sent for approval. Nothing was done."
		}
		return "Expired: not enough approvals before the approval window ended. Nothing was done."
	case StatusCanceled:
		return "Canceled by the requester. Nothing was done."
	}
	return string(m.Status)
}
