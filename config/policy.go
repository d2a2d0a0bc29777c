package config

import (
	"cmp"
	"time"

	"github.com/countersign/countersign/approval"
)

// Policy builds the domain policy.
func (f *File) Policy() *approval.Policy {
	p := &approval.Policy{}
	for _, a := range f.Approvers {
		p.Approvers = append(p.Approvers, &approval.Approver{ID: a.ID, Name: a.Name, Email: a.Email,
			SlackUserID: a.SlackUserID, TeamsUserID: a.TeamsUserID, Groups: a.Groups, TimeZone: a.TimeZone, OIDCSubject: a.OIDCSubject})
	}
	for _, pr := range f.Principals {
		q := pr.Quotas
		p.Principals = append(p.Principals, &approval.Principal{ID: pr.ID, KeyHash: pr.APIKeySHA256,
			Scopes: pr.Scopes, OnBehalfOf: pr.OnBehalfOf, Quotas: approval.Quotas{
				MaxDrafts: q.MaxDrafts, MaxPending: q.MaxPending, MaxStoredBytes: int64(q.MaxStoredBytes),
				RequestsPerMinute: cmp.Or(q.RequestsPerMinute, f.Settings.APIRate), SendsPerMinute: q.SendsPerMinute}})
	}
	for _, o := range f.Operators {
		p.Operators = append(p.Operators, &approval.Operator{ID: o.ID, KeyHash: o.APIKeySHA256, Email: o.Email, OIDCSubject: o.OIDCSubject})
	}
	for _, r := range f.Routes {
		m := approval.Match{Action: r.Match.Action, Principal: r.Match.Principal, Target: r.Match.Target, Tool: r.Match.Tool}
		if len(r.Match.Attrs) > 0 {
			m.Attrs = map[string]string{}
			for k, v := range r.Match.Attrs {
				name, _ := approval.AttrName(k) // validated by Parse
				m.Attrs[name] = v
			}
		}
		for _, c := range r.Match.When {
			if cond, err := c.Condition(); err == nil { // validated by Parse
				m.When = append(m.When, cond)
			}
		}
		p.Routes = append(p.Routes, approval.RouteRule{
			Name: r.Name, Match: m,
			ApproverIDs: r.Approvers.IDs, ApproverGroups: r.Approvers.Groups, Required: r.Required,
			Notify: r.Notify, ApprovalTTL: time.Duration(r.ApprovalTTL), ForbidSelfApproval: r.ForbidSelfApproval,
			Remind: durations(r.Remind), AllowEdit: r.AllowEdit.Allowed, EditorApproves: r.AllowEdit.EditorApproves,
			Allowances: r.Allowances == "allow",
			StepUp:     r.StepUp,
		})
		if e := r.Escalate; e != nil {
			rule := &p.Routes[len(p.Routes)-1]
			rule.Escalate = &approval.EscalateRule{After: time.Duration(e.After), ApproverIDs: e.Approvers.IDs, ApproverGroups: e.Approvers.Groups}
		}
	}
	if f.OIDC != nil {
		p.SignInClaim = f.OIDC.ClaimName()
	}
	return p
}

func durations(ds []Duration) []time.Duration {
	var out []time.Duration
	for _, d := range ds {
		out = append(out, time.Duration(d))
	}
	return out
}
