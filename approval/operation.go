package approval

import (
	"encoding/json"
	"regexp"
	"slices"
	"time"
)

// Status is where an operation is in its lifecycle (SPEC §2).
type Status string

const (
	StatusDraft     Status = "draft"
	StatusPending   Status = "pending_approval"
	StatusApproved  Status = "approved"
	StatusExecuting Status = "executing"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusRejected  Status = "rejected"
	StatusExpired   Status = "expired"
	StatusCanceled  Status = "canceled"
	// StatusSuperseded: an approver's edit replaced it with a new version.
	StatusSuperseded Status = "superseded"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{StatusDraft, StatusPending, StatusApproved, StatusExecuting,
	StatusSucceeded, StatusFailed, StatusRejected, StatusExpired, StatusCanceled, StatusSuperseded}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal statuses never change again.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusRejected, StatusExpired, StatusCanceled, StatusSuperseded:
		return true
	}
	return false
}

// Expirable statuses end in expired when their window passes. An
// executing operation never expires: its outcome is settled by an operator.
func (s Status) Expirable() bool {
	return s == StatusDraft || s == StatusPending || s == StatusApproved
}

// Operation is one proposed action with its exact normalized input.
type Operation struct {
	// Immutable from prepare on.
	Key            string          `json:"operation_key"`
	Action         string          `json:"action"`
	Principal      string          `json:"principal"`
	OnBehalfOf     string          `json:"on_behalf_of,omitempty"`
	Input          json.RawMessage `json:"input"` // canonical (RFC 8785) normalized input
	PayloadHash    string          `json:"payload_hash"`
	Preview        Preview         `json:"preview"`
	State          *StateBinding   `json:"state,omitempty"`
	Route          Route           `json:"route"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Undoes         string          `json:"undoes,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	// Attrs are the facts the action reported at prepare (routes and
	// allowances match on them).
	Attrs map[string]string `json:"attrs,omitempty"`

	// Changed only by store transitions.
	Status    Status     `json:"status"`
	ExpiresAt time.Time  `json:"expires_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	SentAt    *time.Time `json:"sent_at,omitempty"`
	ClaimedAt *time.Time `json:"claimed_at,omitempty"`
	// LeaseUntil is when the executor's claim runs out unless renewed, on
	// the store's clock (nil: claimed without a lease).
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	// LateOutcome is the executor's own outcome when it arrived after an
	// operator had settled the operation (the settled state stays).
	LateOutcome *LateOutcome    `json:"late_outcome,omitempty"`
	Jobs        []Job           `json:"jobs,omitempty"`
	Approvals   []Decision      `json:"approvals,omitempty"`
	Rejection   *Decision       `json:"rejection,omitempty"`
	Deliveries  []Delivery      `json:"deliveries,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       *OpError        `json:"error,omitempty"`
	UndoneBy    string          `json:"undone_by,omitempty"`
	// Reminded are the reminders sent; Escalated the escalation, once it
	// happened.
	Reminded  []Reminder `json:"reminded,omitempty"`
	Escalated *Escalated `json:"escalated,omitempty"`
	// Supersedes is the operation an approver's edit made this one a new
	// version of; SupersededBy the version that replaced this one, and
	// Changed the fields the edit changed.
	Supersedes   string   `json:"supersedes,omitempty"`
	SupersededBy string   `json:"superseded_by,omitempty"`
	Changed      []string `json:"changed,omitempty"`
	// Allowance is the allowance that approved it, if one did.
	Allowance string `json:"allowance,omitempty"`
	// RevokedAt is when the allowance of an allowance.grant was revoked.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// Version counts the changes of the operation; long-polls compare it.
	Version int64 `json:"version"`
	// CallbacksSent counts the status changes its principal's webhook
	// acknowledged (callback.go).
	CallbacksSent int `json:"-"`
}

// Preview is what the human (and the agent) sees: built by the action from
// the same normalized input that is executed.
type Preview struct {
	Title    string   `json:"title"`
	Summary  string   `json:"summary"`
	Fields   []Field  `json:"fields"`
	Diff     []Change `json:"diff,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// WarningCodes is the stable code of each warning, in the same order
	// (Warn keeps them together). An action that gives none, or fewer
	// than its warnings, has the rest derived by WarningCode. In the
	// agent's view both lists hold every warning a human is shown.
	WarningCodes []string `json:"warning_codes,omitempty"`
}

// Warn adds a warning with its stable code.
func (p *Preview) Warn(code, message string) {
	for len(p.WarningCodes) < len(p.Warnings) {
		p.WarningCodes = append(p.WarningCodes, WarningCode(p.Warnings[len(p.WarningCodes)]))
	}
	p.Warnings = append(p.Warnings, message)
	p.WarningCodes = append(p.WarningCodes, code)
}

// Code is the stable code of warning i.
func (p Preview) Code(i int) string {
	if i < len(p.WarningCodes) && p.WarningCodes[i] != "" {
		return p.WarningCodes[i]
	}
	return WarningCode(p.Warnings[i])
}

// Stable warning codes (SPEC §6): clients match these, never the
// sentences, which may be reworded.
const (
	WarnIrreversible     = "irreversible"
	WarnHiddenCharacters = "hidden_characters"
	WarnHTMLDiffers      = "html_differs_from_text"
	WarnHiddenHTMLText   = "hidden_html_text"
	WarnUnshownHTMLText  = "html_text_not_shown"
	WarnRemoteContent    = "remote_content"
	WarnLookalikeLink    = "lookalike_link"
	WarnMixedScript      = "mixed_script"
	WarnSlackMarkup      = "slack_markup"
	WarnActiveAttachment = "active_attachment"
	WarnNotice           = "notice"
)

// warningToken is a warning that is its own code ("irreversible",
// "no_etag") or starts with one ("irreversible: a deleted message…").
var warningToken = regexp.MustCompile(`^([a-z][a-z0-9_]*)(?:$|: )`)

// WarningCode derives the code of a warning an action gave without one:
// the token it is or starts with, else "notice".
func WarningCode(w string) string {
	if m := warningToken.FindStringSubmatch(w); m != nil {
		return m[1]
	}
	return WarnNotice
}

// Field is one labelled value of a preview, shown verbatim.
type Field struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	Value string `json:"value"`
	// Long marks multi-line content (a message body) for display.
	Long bool `json:"long,omitempty"`
	// Format is "html" for an HTML body, which humans are shown rendered
	// (sanitized) as well as in source; empty means plain text.
	Format string `json:"format,omitempty"`
	// Item is the number (from 1) of the bulk item the field belongs to
	// (SPEC §10); 0 for a field of the operation itself. An item's first
	// field is its heading.
	Item int `json:"item,omitempty"`
	// Technical marks the exact protocol detail behind something the
	// preview already says in plain words (the If-Match header behind "only
	// if the record has not changed since it was read"): shown to people
	// after everything else, where a page may fold it.
	Technical bool `json:"technical,omitempty"`
	// Bounded marks a value the agent did not choose, whose shown size
	// (escapes included) the action bounded itself: an upstream MCP
	// server's words. The check that an agent's request cannot make its
	// preview grow past a multiple of its size leaves it out. Kept only
	// while preparing.
	Bounded bool `json:"-"`
}

// FormatHTML marks a field whose value is an HTML document.
const FormatHTML = "html"

// Change is one field of a diff. Before and After are JSON values; nil
// means absent, and an absent side is left out of the JSON, so that it
// stays distinct from a JSON null through storage and in the agent view.
type Change struct {
	Field  string          `json:"field"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
	// Item is the number (from 1) of the bulk item the change belongs to;
	// 0 for a single operation.
	Item int `json:"item,omitempty"`
}

// StateBinding is the state an operation was prepared against.
type StateBinding struct {
	Hash     string          `json:"hash"`
	Snapshot json.RawMessage `json:"snapshot"`
	ETag     string          `json:"etag,omitempty"`
}

// Route is the resolved policy of one operation, fixed at prepare.
type Route struct {
	Name               string        `json:"name"`
	Approvers          []string      `json:"approvers"`
	Required           int           `json:"required"`
	Notify             []string      `json:"notify"`
	ApprovalTTL        time.Duration `json:"approval_ttl"`
	ForbidSelfApproval bool          `json:"forbid_self_approval,omitempty"`
	// Remind: re-notify who has not decided, after each interval from the send.
	Remind []time.Duration `json:"remind,omitempty"`
	// Escalate: approvers added if nobody decided in time.
	Escalate *Escalation `json:"escalate,omitempty"`
	// AllowEdit: approvers may edit the editable fields (a new version);
	// EditorApproves: the editor's approval counts for it.
	AllowEdit      bool `json:"allow_edit,omitempty"`
	EditorApproves bool `json:"editor_approves,omitempty"`
	// Allowances: allowances may approve this route's irreversible actions.
	Allowances bool `json:"allowances,omitempty"`
	// StepUp is "passkey" when deciding needs a passkey assertion bound
	// to the decision (SPEC §11); "" otherwise.
	StepUp string `json:"step_up,omitempty"`
}

// Escalation is who is added, and when, if nobody decided in time.
type Escalation struct {
	After     time.Duration `json:"after"`
	Approvers []string      `json:"approvers"`
}

// HasApprover reports whether id may decide the operation: an approver of
// its route, or one added by its escalation once it happened.
func (op *Operation) HasApprover(id string) bool {
	if op.Route.HasApprover(id) {
		return true
	}
	return op.Escalated != nil && slices.Contains(op.Escalated.Approvers, id)
}

// Approvers lists everyone who may decide it now.
func (op *Operation) Approvers() []string {
	out := slices.Clone(op.Route.Approvers)
	if op.Escalated != nil {
		out = append(out, op.Escalated.Approvers...)
	}
	return out
}

// HasApprover reports whether id is an approver of this route.
func (r Route) HasApprover(id string) bool {
	for _, a := range r.Approvers {
		if a == id {
			return true
		}
	}
	return false
}

// Reminder is one reminder sent to the approvers who had not decided.
type Reminder struct {
	N  int       `json:"n"` // 1 for the first
	At time.Time `json:"at"`
}

// Escalated is when approvers were added.
type Escalated struct {
	At        time.Time `json:"at"`
	Approvers []string  `json:"approvers"`
}

// Job is one notification to deliver: a channel, and either an approver
// (personal messages carrying their own capability) or a shared target
// such as a Slack channel.
type Job struct {
	ID       string `json:"id"`
	Channel  string `json:"channel"`
	Target   string `json:"target,omitempty"`
	Approver string `json:"approver,omitempty"`
	// Link says the message carries a signed approval link.
	Link bool `json:"link,omitempty"`
	// Reminder is the reminder it belongs to (0 for the first notice);
	// Of is then the job it reminds of.
	Reminder int    `json:"reminder,omitempty"`
	Of       string `json:"of,omitempty"`
}

// Decision is one approver's approval or rejection.
type Decision struct {
	Approver    string    `json:"approver"`
	Via         string    `json:"via"`
	At          time.Time `json:"at"`
	PayloadHash string    `json:"payload_hash"`
	Reason      string    `json:"reason,omitempty"`
	// Tx is the transition that recorded it, so that its retry is
	// recognised.
	Tx string `json:"tx,omitempty"`
}

// Delivery records a notification that reached its channel. Handle holds
// what a channel needs to edit the message later (Slack channel and ts).
type Delivery struct {
	Job     string            `json:"job"`
	Channel string            `json:"channel"`
	To      string            `json:"to"`
	At      time.Time         `json:"at"`
	Handle  map[string]string `json:"handle,omitempty"`
}

// OpError is the error of a failed operation.
type OpError struct {
	Code           Code           `json:"code"`
	Message        string         `json:"message"`
	OutcomeUnknown *bool          `json:"outcome_unknown,omitempty"`
	Details        map[string]any `json:"details,omitempty"`
}

// LateOutcome is what an executor found after an operator had already
// settled its operation: it resumed (a pause, a slow target) and its
// effect went out, or it found its claim fenced and wrote nothing.
type LateOutcome struct {
	Status Status          `json:"status"`
	At     time.Time       `json:"at"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *OpError        `json:"error,omitempty"`
}

// ExecError is what an action returns when execution fails; it becomes the
// operation's error.
type ExecError struct {
	Code           Code
	Message        string
	OutcomeUnknown bool
	Details        map[string]any
}

func (e *ExecError) Error() string { return string(e.Code) + ": " + e.Message }

// Approved reports whether approver has already approved.
func (op *Operation) Decided(approver string) bool {
	if op.Rejection != nil && op.Rejection.Approver == approver {
		return true
	}
	for _, d := range op.Approvals {
		if d.Approver == approver {
			return true
		}
	}
	return false
}

// EffectiveStatus is the status as of now: an expirable operation whose
// window has passed is expired even before a worker records it.
func (op *Operation) EffectiveStatus(now time.Time) Status {
	if op.Status.Expirable() && !now.Before(op.ExpiresAt) {
		return StatusExpired
	}
	return op.Status
}

// Event is one audit entry: every transition and decision.
type Event struct {
	Time        time.Time      `json:"time"`
	Operation   string         `json:"operation_key"`
	Event       string         `json:"event"`
	Actor       string         `json:"actor"`
	Channel     string         `json:"channel,omitempty"`
	PayloadHash string         `json:"payload_hash"`
	Status      Status         `json:"status,omitempty"`
	Outcome     string         `json:"outcome,omitempty"`
	Details     map[string]any `json:"details,omitempty"`

	// Action, From and SentAt repeat what the operation said when the
	// event was made, for metrics (OnEvent hooks); they are not part of
	// the audit record. From is the status before the event.
	Action string     `json:"-"`
	From   Status     `json:"-"`
	SentAt *time.Time `json:"-"`
	// Principal owns the operation; set by the store's sweep only.
	Principal string `json:"-"`
}
