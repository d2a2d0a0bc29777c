package approval

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Principal is an agent or other automated caller, known by its API key.
type Principal struct {
	ID         string
	KeyHash    string // lowercase hex SHA-256 of the API key
	Scopes     []string
	OnBehalfOf string // the approver id of the human it works for, if any
}

// Allows reports whether the principal may prepare an operation needing
// scope. "http.request" covers every "http.request:<target>"; "*" covers all.
func (p *Principal) Allows(scope string) bool {
	for _, s := range p.Scopes {
		if s == "*" || s == scope {
			return true
		}
		if base, _, ok := strings.Cut(scope, ":"); ok && s == base {
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
	Groups      []string
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
}

// Match selects operations. Empty fields match anything; Attrs must all
// equal the attributes the action reported (e.g. "target": "calendar").
type Match struct {
	Action    string
	Principal string
	Attrs     map[string]string
}

func (m Match) matches(action, principal string, attrs map[string]string) bool {
	if m.Action != "" && m.Action != action && !(strings.HasSuffix(m.Action, ".*") && strings.HasPrefix(action, strings.TrimSuffix(m.Action, "*"))) {
		return false
	}
	if m.Principal != "" && m.Principal != principal {
		return false
	}
	for k, v := range m.Attrs {
		if attrs[k] != v {
			return false
		}
	}
	return true
}

// Policy holds who may do what and who must approve it.
type Policy struct {
	Principals []*Principal
	Approvers  []*Approver
	Routes     []RouteRule
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

// Resolve picks the route of an operation: the first rule that matches,
// with its approvers expanded. The human the principal acts for is left out
// when the route forbids self-approval, so that it never counts towards
// quorum. Returns no_route when no rule matches or the rule leaves fewer
// approvers than it requires.
func (p *Policy) Resolve(action string, pr *Principal, attrs map[string]string) (Route, error) {
	for i, r := range p.Routes {
		if !r.Match.matches(action, pr.ID, attrs) {
			continue
		}
		var ids []string
		for _, a := range p.Approvers {
			if !slices.Contains(r.ApproverIDs, a.ID) && !overlaps(a.Groups, r.ApproverGroups) {
				continue
			}
			if r.ForbidSelfApproval && pr.OnBehalfOf == a.ID {
				continue
			}
			ids = append(ids, a.ID)
		}
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("route %d", i+1)
		}
		req := max(r.Required, 1)
		if len(ids) < req {
			return Route{}, Errorf(CodeNoRoute, "route %q has %d eligible approver(s) but requires %d", name, len(ids), req).
				WithDetails(map[string]any{"route": name})
		}
		ttl := r.ApprovalTTL
		if ttl == 0 {
			ttl = DefaultApprovalTTL
		}
		return Route{Name: name, Approvers: ids, Required: req, Notify: slices.Clone(r.Notify),
			ApprovalTTL: ttl, ForbidSelfApproval: r.ForbidSelfApproval}, nil
	}
	return Route{}, Errorf(CodeNoRoute, "no route gives %s any approver", action)
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}
