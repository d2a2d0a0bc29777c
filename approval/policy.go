package approval

import (
	"cmp"
	"strings"
	"time"
)

// Principal is an agent or other automated caller, known by its API key.
type Principal struct {
	ID         string
	KeyHash    string // lowercase hex SHA-256 of the API key
	Scopes     []string
	OnBehalfOf string // the approver id of the human it works for, if any
	// Quotas bound what it may keep and do; zero fields take DefaultQuotas.
	Quotas Quotas
}

// Limits returns the principal's quotas with defaults filled in.
func (p *Principal) Limits() Quotas {
	q, d := p.Quotas, DefaultQuotas
	q.MaxDrafts = cmp.Or(q.MaxDrafts, d.MaxDrafts)
	q.MaxPending = cmp.Or(q.MaxPending, d.MaxPending)
	q.MaxStoredBytes = cmp.Or(q.MaxStoredBytes, d.MaxStoredBytes)
	q.RequestsPerMinute = cmp.Or(q.RequestsPerMinute, d.RequestsPerMinute)
	q.SendsPerMinute = cmp.Or(q.SendsPerMinute, d.SendsPerMinute)
	return q
}

// Allows reports whether the principal may prepare an operation needing
// scope. "http.request" covers every "http.request:<target>", "mcp:NAME"
// every "mcp:NAME/TOOL"; "*" covers all.
func (p *Principal) Allows(scope string) bool {
	for _, s := range p.Scopes {
		if s == "*" || s == scope {
			return true
		}
		if base, _, ok := strings.Cut(scope, ":"); ok && s == base {
			return true
		}
		// "mcp:files" covers "mcp:files/write_file".
		if head, _, ok := strings.Cut(scope, "/"); ok && s == head {
			return true
		}
	}
	return false
}

// Approver is a human who can decide.
type Approver struct {
	ID          string
	Name        string
	Email       string
	SlackUserID string
	// TeamsUserID is the person in Microsoft Teams: their Teams user id as
	// this bot sees it ("29:…") or their Entra object id (a GUID).
	TeamsUserID string
	Groups      []string
	// TimeZone is an IANA zone name for showing times to this person ("" = UTC only).
	TimeZone string
	// OIDCSubject is the value of the sign-in claim that names this
	// person, when the claim is not email (approval/signin.go).
	OIDCSubject string
}

// DisplayName is the name if set, else the id.
func (a *Approver) DisplayName() string {
	if a.Name != "" {
		return a.Name
	}
	return a.ID
}

// RouteRule is one route of the policy file; the first that matches wins.
type RouteRule struct {
	Name  string
	Match Match
	// Approvers by id and by group; the union is the route's approvers.
	ApproverIDs        []string
	ApproverGroups     []string
	Required           int
	Notify             []string
	ApprovalTTL        time.Duration
	ForbidSelfApproval bool
	// Remind re-notifies the approvers who have not decided, after each
	// interval from the send.
	Remind []time.Duration
	// Escalate adds approvers when nobody decided in time.
	Escalate *EscalateRule
	// AllowEdit lets approvers edit the editable fields (a new version);
	// EditorApproves counts the editor's approval for it.
	AllowEdit, EditorApproves bool
	// Allowances lets allowances approve this route's irreversible actions.
	Allowances bool
	StepUp     string
}

// EscalateRule adds approvers, by id and group, After the send.
type EscalateRule struct {
	After          time.Duration
	ApproverIDs    []string
	ApproverGroups []string
}

// Policy holds who may do what and who must approve it.
type Policy struct {
	Principals []*Principal
	Approvers  []*Approver
	Routes     []RouteRule
	// Operators may use the admin API (approval/admin.go).
	Operators []*Operator
	// SignInClaim is the ID token claim that names a person who signs in
	// to the inbox or the console ("email" or another, matched against
	// oidc_subject); "" when sign-in is off.
	SignInClaim string
}

// Defaults of SPEC §2.
const (
	DefaultDraftTTL    = 15 * time.Minute
	MinDraftTTL        = time.Minute
	MaxDraftTTL        = time.Hour
	DefaultApprovalTTL = time.Hour
	MinApprovalTTL     = time.Minute
	MaxApprovalTTL     = 7 * 24 * time.Hour
	DefaultRetention   = 7 * 24 * time.Hour
	// DefaultDraftRetention is how long a draft that ended unsent is kept.
	DefaultDraftRetention = time.Hour
)

// PrincipalByKeyHash finds the principal whose key hashes to h.
func (p *Policy) PrincipalByKeyHash(h string) *Principal {
	for _, pr := range p.Principals {
		if pr.KeyHash == h {
			return pr
		}
	}
	return nil
}

// Principal finds a principal by id.
func (p *Policy) Principal(id string) *Principal {
	for _, pr := range p.Principals {
		if pr.ID == id {
			return pr
		}
	}
	return nil
}

// Approver finds an approver by id.
func (p *Policy) Approver(id string) *Approver {
	for _, a := range p.Approvers {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// ApproverBySlack finds the approver with this Slack user id.
func (p *Policy) ApproverBySlack(userID string) *Approver {
	if userID == "" {
		return nil
	}
	for _, a := range p.Approvers {
		if a.SlackUserID == userID {
			return a
		}
	}
	return nil
}

// ApproverByTeams finds the approver with one of these Microsoft Teams
// ids (the clicking user's Teams id and Entra object id).
func (p *Policy) ApproverByTeams(ids ...string) *Approver {
	for _, id := range ids {
		if id == "" {
			continue
		}
		for _, a := range p.Approvers {
			if a.TeamsUserID != "" && sameTeamsID(a.TeamsUserID, id) {
				return a
			}
		}
	}
	return nil
}

// sameTeamsID compares Teams ids exactly, except Entra object ids (GUIDs),
// which are the same in any letter case.
func sameTeamsID(a, b string) bool {
	if a == b {
		return true
	}
	return isGUID(a) && isGUID(b) && strings.EqualFold(a, b)
}

func isGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if r != '-' {
				return false
			}
		case !strings.ContainsRune("0123456789abcdefABCDEF", r):
			return false
		}
	}
	return true
}
