package approval

import (
	"fmt"
	"slices"
)

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
