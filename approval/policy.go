package approval

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
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

// Match selects operations. Empty fields match anything; every field that
// is set must match (they are ANDed). Attrs must all equal the attributes
// the action reported; When conditions must all hold. For "either … or",
// write two routes: the first that matches wins.
type Match struct {
	// Action is an action name ("http.request") or a family ("slack.*").
	Action    string
	Principal string
	// Target is short for the attribute "target" (http.request).
	Target string
	// Tool is short for the attribute "tool" (host.tool_call).
	Tool  string
	Attrs map[string]string
	When  []Condition
}

func (m Match) matches(action, principal string, attrs map[string]string) bool {
	ok, _ := m.Check(action, principal, attrs)
	return ok
}

// Check reports whether the match selects an operation and why: when it
// does not, the first reason; when it does only because a condition could
// not be decided (see Condition), which one (for check-config to explain a
// route).
func (m Match) Check(action, principal string, attrs map[string]string) (bool, string) {
	if m.Action != "" && m.Action != action && !(strings.HasSuffix(m.Action, ".*") && strings.HasPrefix(action, strings.TrimSuffix(m.Action, "*"))) {
		return false, fmt.Sprintf("action is %s, not %s", action, m.Action)
	}
	if m.Principal != "" && m.Principal != principal {
		return false, fmt.Sprintf("principal is %s, not %s", principal, m.Principal)
	}
	if m.Target != "" && attrs["target"] != m.Target {
		return false, fmt.Sprintf("target is %q, not %s", attrs["target"], m.Target)
	}
	if m.Tool != "" && attrs["tool"] != m.Tool {
		return false, fmt.Sprintf("tool is %q, not %s", attrs["tool"], m.Tool)
	}
	var undecided []string
	for _, k := range slices.Sorted(maps.Keys(m.Attrs)) {
		c := Condition{Attr: k, Op: OpEq, Values: []string{m.Attrs[k]}}
		switch verdict, why := c.Eval(attrs); verdict {
		case Fails:
			return false, fmt.Sprintf("%s is %s, not %q", k, describeAttr(attrs, k), m.Attrs[k])
		case Undecidable:
			undecided = append(undecided, fmt.Sprintf("%s=%s cannot be evaluated (%s)", k, m.Attrs[k], why))
		}
	}
	for _, c := range m.When {
		switch verdict, why := c.Eval(attrs); verdict {
		case Fails:
			return false, fmt.Sprintf("%s does not hold (%s)", c, why)
		case Undecidable:
			undecided = append(undecided, fmt.Sprintf("%s cannot be evaluated (%s)", c, why))
		}
	}
	if len(undecided) > 0 {
		return true, "taken because " + strings.Join(undecided, "; ") +
			": a route whose condition cannot be evaluated is taken, so a malformed value lands on the route that guards against it"
	}
	return true, ""
}

func describeAttr(attrs map[string]string, k string) string {
	if v, ok := lookupAttr(attrs, k); ok {
		return DescribeAttrValue(v)
	}
	return "absent"
}

// String renders the match for humans: "action=http.request target=billing
// body.amount > 1000"; "everything" when it is empty.
func (m Match) String() string {
	var parts []string
	if m.Action != "" {
		parts = append(parts, "action="+m.Action)
	}
	if m.Principal != "" {
		parts = append(parts, "principal="+m.Principal)
	}
	if m.Target != "" {
		parts = append(parts, "target="+m.Target)
	}
	if m.Tool != "" {
		parts = append(parts, "tool="+m.Tool)
	}
	for _, k := range slices.Sorted(maps.Keys(m.Attrs)) {
		parts = append(parts, k+"="+m.Attrs[k])
	}
	for _, c := range m.When {
		parts = append(parts, c.String())
	}
	if len(parts) == 0 {
		return "everything"
	}
	return strings.Join(parts, " ")
}

// CondOp is the operator of a route condition.
type CondOp string

// The condition language of routes (match.when in the policy file). Each
// condition names one attribute the action reported (a string) and one
// operator. Attributes are strings; the numeric operators read them as
// numbers written as in JSON (1000, 12.5, 1e3).
//
//	eq, ne        equal / not equal to one value ("ne" holds when absent)
//	in, not_in    one of / none of a list ("not_in" holds when absent)
//	gt, gte,      numeric comparison; fails when the attribute is absent
//	lt, lte
//	present       the attribute is present (present: true) or absent (false)
//	matches       glob (path.Match: *, ?, [a-z]) over the whole value
//
// A condition on an attribute the operation does not have never holds,
// except ne, not_in and absent: a missing amount falls through to the next
// route, as the file reads.
//
// Conditions fail closed. A condition on an attribute that is present but
// cannot be compared is undecidable (Eval): a numeric operator on a value
// that is not a finite JSON number ("5,000", "", "null", true), or any
// operator but present/absent on a list, an object, an over-long string,
// or anything inside a list (AttrOpaque). An undecidable condition counts
// as holding, so the route is taken: the first route that guards against a
// value wins when the value is malformed, and "5,000" or [5000] can never
// pass over a stricter route. Put the stricter route first and match it on
// what makes it strict (a route written the other way round, lenient first
// with lte, would take malformed values on the lenient route).
const (
	OpEq      CondOp = "eq"
	OpNe      CondOp = "ne"
	OpIn      CondOp = "in"
	OpNotIn   CondOp = "not_in"
	OpGt      CondOp = "gt"
	OpGte     CondOp = "gte"
	OpLt      CondOp = "lt"
	OpLte     CondOp = "lte"
	OpPresent CondOp = "present"
	OpAbsent  CondOp = "absent"
	OpMatches CondOp = "matches"
)

// Condition is one test on an operation's attributes.
type Condition struct {
	Attr string
	Op   CondOp
	// Values is the operand of eq, ne, matches (one) and in, not_in (any).
	Values []string
	// Number is the operand of gt, gte, lt, lte.
	Number float64
}

// Validate reports a malformed condition (for the config loader).
func (c Condition) Validate() error {
	if c.Attr == "" {
		return fmt.Errorf("condition needs an attr")
	}
	switch c.Op {
	case OpEq, OpNe:
		if len(c.Values) != 1 {
			return fmt.Errorf("%s on %s takes one value", c.Op, c.Attr)
		}
	case OpIn, OpNotIn:
		if len(c.Values) == 0 {
			return fmt.Errorf("%s on %s needs at least one value", c.Op, c.Attr)
		}
	case OpMatches:
		if len(c.Values) != 1 {
			return fmt.Errorf("matches on %s takes one pattern", c.Attr)
		}
		if _, err := path.Match(c.Values[0], ""); err != nil {
			return fmt.Errorf("matches on %s: bad pattern %q", c.Attr, c.Values[0])
		}
	case OpGt, OpGte, OpLt, OpLte:
		if math.IsNaN(c.Number) || math.IsInf(c.Number, 0) {
			return fmt.Errorf("%s on %s needs a finite number", c.Op, c.Attr)
		}
	case OpPresent, OpAbsent:
	default:
		return fmt.Errorf("unknown operator %q (eq, ne, in, not_in, gt, gte, lt, lte, present, matches)", c.Op)
	}
	return nil
}

// Holds reports whether the condition selects an operation: it holds, or
// it cannot be decided (which takes the route: conditions fail closed).
func (c Condition) Holds(attrs map[string]string) bool {
	v, _ := c.Eval(attrs)
	return v != Fails
}

// String renders the condition: "body.amount > 1000", "method in [PUT DELETE]".
func (c Condition) String() string {
	num := strconv.FormatFloat(c.Number, 'f', -1, 64)
	switch c.Op {
	case OpPresent:
		return c.Attr + " present"
	case OpAbsent:
		return c.Attr + " absent"
	case OpEq:
		return c.Attr + " = " + strconv.Quote(strings.Join(c.Values, ""))
	case OpNe:
		return c.Attr + " != " + strconv.Quote(strings.Join(c.Values, ""))
	case OpIn:
		return c.Attr + " in [" + strings.Join(c.Values, " ") + "]"
	case OpNotIn:
		return c.Attr + " not in [" + strings.Join(c.Values, " ") + "]"
	case OpMatches:
		return c.Attr + " matches " + strconv.Quote(strings.Join(c.Values, ""))
	case OpGt:
		return c.Attr + " > " + num
	case OpGte:
		return c.Attr + " >= " + num
	case OpLt:
		return c.Attr + " < " + num
	case OpLte:
		return c.Attr + " <= " + num
	}
	return c.Attr + " " + string(c.Op) + "?"
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
		ids := p.eligible(r.ApproverIDs, r.ApproverGroups, r.ForbidSelfApproval, pr, nil)
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
		route := Route{Name: name, Approvers: ids, Required: req, Notify: slices.Clone(r.Notify),
			ApprovalTTL: ttl, ForbidSelfApproval: r.ForbidSelfApproval, Remind: slices.Clone(r.Remind),
			AllowEdit: r.AllowEdit, EditorApproves: r.EditorApproves, Allowances: r.Allowances, StepUp: r.StepUp}
		if e := r.Escalate; e != nil {
			if more := p.eligible(e.ApproverIDs, e.ApproverGroups, r.ForbidSelfApproval, pr, ids); len(more) > 0 {
				route.Escalate = &Escalation{After: e.After, Approvers: more}
			}
		}
		return route, nil
	}
	return Route{}, Errorf(CodeNoRoute, "no route gives %s any approver", action)
}

// eligible expands ids and groups into approvers, leaving out the human
// the principal acts for when self-approval is forbidden, and those in not.
func (p *Policy) eligible(idList, groups []string, noSelf bool, pr *Principal, not []string) []string {
	var ids []string
	for _, a := range p.Approvers {
		if !slices.Contains(idList, a.ID) && !overlaps(a.Groups, groups) {
			continue
		}
		if (noSelf && pr.OnBehalfOf == a.ID) || slices.Contains(not, a.ID) {
			continue
		}
		ids = append(ids, a.ID)
	}
	return ids
}

// RouteCheck is how one route of the policy answered a sample operation.
type RouteCheck struct {
	Name    string
	Matched bool
	// Why is the first reason the route did not match.
	Why string
}

// Explain walks the routes in order for a sample operation, up to and
// including the first that matches (the one Resolve picks), saying why each
// earlier route was passed over. check-config prints it.
func (p *Policy) Explain(action string, pr *Principal, attrs map[string]string) []RouteCheck {
	var out []RouteCheck
	for i, r := range p.Routes {
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("route %d", i+1)
		}
		ok, why := r.Match.Check(action, pr.ID, attrs)
		out = append(out, RouteCheck{Name: name, Matched: ok, Why: why})
		if ok {
			break
		}
	}
	return out
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}
