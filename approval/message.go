package approval

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Message is the channel-neutral text about one operation, built once and
// adapted by each channel (email, Slack, console, webhook, the approval
// page), so that every human sees the same preview the agent saw.
//
// Every string in it is safe to show (guarantee 11): characters that
// would be invisible or reorder the text around them are escaped as
// ⟨U+XXXX⟩ (package safetext), one-line values hold no line break, and
// Warnings name what was escaped. Title, Summary, field values, diff
// values and warnings carry agent-chosen text: channels show them fenced
// off from their own words (safetext.Fence in plain text, a visibly
// separate block in HTML and Slack).
type Message struct {
	OperationKey string
	Action       string
	Title        string
	Summary      string
	Fields       []ShownField
	Diff         []ShownChange
	// Warnings are the action's (the stable token "irreversible" first
	// when present), then the renderer's: hidden characters, an HTML part
	// that says something else than the text part, Slack markup.
	Warnings []string
	// WarningCodes is the stable code of each warning, in the same order
	// ("irreversible", "hidden_characters", "hidden_html_text", …).
	WarningCodes []string
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
	Stale []ShownChange
	// Outcome is one plain sentence about where the operation stands.
	Outcome string
	// Hidden lists the hidden characters escaped in the agent's text.
	Hidden []HiddenChar
	// Reminded is how many reminders were sent; Escalated names the
	// approvers an escalation added (display names).
	Reminded  int
	Escalated []string
	// Waiting names the approvers who have not decided (display names).
	Waiting []string
	// StepUp is "passkey" when deciding needs a passkey (SPEC §11): chat
	// channels then offer no decision, only the way to the page.
	StepUp string
	// Editable: the route lets approvers edit it as a new version (chat
	// channels offer Edit while it is pending).
	Editable bool
	// Revocable: an allowance in force, which its approvers may end (the
	// page and Slack offer it).
	Revocable bool
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
	r := newRenderer()
	m := Message{
		OperationKey: op.Key, Action: op.Action,
		Requester: r.line("Requested by", op.Principal), PayloadHash: op.PayloadHash, ExpiresAt: op.ExpiresAt,
		Required: op.Route.Required, Status: op.EffectiveStatus(now), StepUp: op.Route.StepUp,
	}
	m.Editable = op.Route.AllowEdit && m.Status == StatusPending
	m.Revocable = op.Action == GrantAction && m.Status == StatusSucceeded && op.RevokedAt == nil
	r.preview(&m, op.Preview)
	if op.OnBehalfOf != "" {
		m.OnBehalfOf = op.OnBehalfOf
		if a := p.Approver(op.OnBehalfOf); a != nil {
			m.OnBehalfOf = a.DisplayName()
		}
		m.OnBehalfOf = r.line("On behalf of", m.OnBehalfOf)
	}
	view := func(d Decision) DecisionView {
		v := DecisionView{Approver: d.Approver, Name: d.Approver, Via: d.Via, At: d.At, Reason: d.Reason}
		if a := p.Approver(d.Approver); a != nil {
			v.Name = a.DisplayName()
		}
		v.Name = r.line("Approver", v.Name)
		v.Reason = r.line("Reason", v.Reason)
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
		m.Stale = r.changes("Changed since it was prepared", StaleChanges(op.Error))
	}
	name := func(id string) string {
		if a := p.Approver(id); a != nil {
			return r.line("Approver", a.DisplayName())
		}
		return r.line("Approver", id)
	}
	m.Reminded = len(op.Reminded)
	if op.Escalated != nil {
		for _, id := range op.Escalated.Approvers {
			m.Escalated = append(m.Escalated, name(id))
		}
	}
	for _, id := range op.Approvers() {
		if !op.Decided(id) {
			m.Waiting = append(m.Waiting, name(id))
		}
	}
	m.Outcome = r.line("Outcome", outcome(op, m))
	r.finish(&m)
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
			n = append(n, fmt.Sprintf("%s (%s)", a.Name, ViaWords(a.Via)))
		}
		return strings.Join(n, ", ")
	}
	switch m.Status {
	case StatusDraft:
		return "Draft: not yet sent for approval."
	case StatusPending:
		s := fmt.Sprintf("Waiting for approval (%d required).", m.Required)
		if len(m.Approvals) > 0 {
			s = fmt.Sprintf("Waiting for approval: %d of %d approvals so far (%s).", len(m.Approvals), m.Required, names())
		}
		if len(m.Escalated) > 0 {
			s += " Nobody decided in time, so it was escalated to " + strings.Join(m.Escalated, ", ") + "."
		}
		if m.Reminded > 0 {
			s += fmt.Sprintf(" Reminders sent: %d.", m.Reminded)
		}
		return s
	case StatusApproved:
		return "Approved by " + names() + ". Waiting to run."
	case StatusExecuting:
		return "Approved by " + names() + ". Running now."
	case StatusSucceeded:
		if op.Action == GrantAction {
			if op.RevokedAt != nil {
				return "Approved by " + names() + "; the allowance was revoked and approves nothing more."
			}
			return "Approved by " + names() + ": the allowance is active until its budget or time runs out, or someone revokes it."
		}
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
			s := fmt.Sprintf("Rejected by %s (%s).", r.Name, ViaWords(r.Via))
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
	case StatusSuperseded:
		return "Replaced by a new version that an approver edited (" + op.SupersededBy + "). This version will not run."
	}
	return string(m.Status)
}

// ViaWords says in plain words how a decision was made: "by email",
// "in Slack", for people who do not know the channel names.
func ViaWords(channel string) string {
	switch channel {
	case "email":
		return "by email"
	case "slack":
		return "in Slack"
	case "console":
		return "with a link from the server console"
	case "webhook":
		return "with a link sent by webhook"
	case "teams":
		return "in Microsoft Teams"
	case "allowance":
		return "by a standing allowance"
	case ViaInbox:
		return "in the countersign inbox"
	}
	return "via " + channel
}
