package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/approval"
	"gopkg.in/yaml.v3"
)

// RouteSpec is one route; the first that matches wins.
type RouteSpec struct {
	Name               string    `yaml:"name"`
	Match              MatchSpec `yaml:"match"`
	Approvers          Who       `yaml:"approvers"`
	Required           int       `yaml:"required"`
	Notify             []string  `yaml:"notify"`
	ApprovalTTL        Duration  `yaml:"approval_ttl"`
	ForbidSelfApproval bool      `yaml:"forbid_self_approval"`
	// Remind re-notifies the approvers who have not decided, after each
	// interval from the send: [30m, 2h].
	Remind []Duration `yaml:"remind"`
	// Escalate adds approvers once when nobody decided in time.
	Escalate *EscalateSpec `yaml:"escalate"`
	// AllowEdit: true, or {editor_approves: true} to count the editor's
	// approval for the new version.
	AllowEdit EditSpec `yaml:"allow_edit"`
	// Allowances: "allow" lets allowances approve this route's
	// irreversible actions too; "never" (the default) does not.
	Allowances string `yaml:"allowances"`
	// StepUp "passkey": deciding needs a passkey assertion (SPEC §11).
	StepUp string `yaml:"step_up"`
}

// EscalateSpec is {after: 1h, approvers: {groups: [leads]}}.
type EscalateSpec struct {
	After     Duration `yaml:"after"`
	Approvers Who      `yaml:"approvers"`
}

// EditSpec is allow_edit: a bool, or {editor_approves: bool}.
type EditSpec struct {
	Allowed        bool
	EditorApproves bool
}

// UnmarshalYAML reads true/false or {editor_approves: true}.
func (e *EditSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&e.Allowed)
	}
	var m struct {
		EditorApproves bool `yaml:"editor_approves"`
	}
	if err := n.Decode(&m); err != nil {
		return fmt.Errorf("line %d: allow_edit is true, false or {editor_approves: true}", n.Line)
	}
	e.Allowed, e.EditorApproves = true, m.EditorApproves
	return nil
}

// MatchSpec selects operations. Every field set must match; when lists
// conditions on the attributes the action reports, all of which must hold
// (see docs/http-targets.md for the attributes and operators).
type MatchSpec struct {
	Action    string            `yaml:"action"`
	Principal string            `yaml:"principal"`
	Target    string            `yaml:"target"`
	Tool      string            `yaml:"tool"`
	Attrs     map[string]string `yaml:"attrs"`
	When      []CondSpec        `yaml:"when"`
}

// CondSpec is one route condition as written: an attribute and exactly one
// operator, e.g. {attr: body.amount, gt: 1000} or {attr: method, in: [PUT, DELETE]}.
type CondSpec struct {
	Attr    string   `yaml:"attr"`
	Eq      *string  `yaml:"eq"`
	Ne      *string  `yaml:"ne"`
	In      []string `yaml:"in"`
	NotIn   []string `yaml:"not_in"`
	Gt      *float64 `yaml:"gt"`
	Gte     *float64 `yaml:"gte"`
	Lt      *float64 `yaml:"lt"`
	Lte     *float64 `yaml:"lte"`
	Present *bool    `yaml:"present"`
	Matches *string  `yaml:"matches"`
}

// Condition turns the written form into the domain's condition. Returns an
// error unless exactly one operator is given and it is well formed.
func (c CondSpec) Condition() (approval.Condition, error) {
	attr, err := approval.AttrName(c.Attr) // a JSON Pointer is read as its dotted name
	if err != nil {
		return approval.Condition{}, err
	}
	var out []approval.Condition
	add := func(op approval.CondOp, values []string, n float64) {
		out = append(out, approval.Condition{Attr: attr, Op: op, Values: values, Number: n})
	}
	if c.Eq != nil {
		add(approval.OpEq, []string{*c.Eq}, 0)
	}
	if c.Ne != nil {
		add(approval.OpNe, []string{*c.Ne}, 0)
	}
	if c.In != nil {
		add(approval.OpIn, c.In, 0)
	}
	if c.NotIn != nil {
		add(approval.OpNotIn, c.NotIn, 0)
	}
	for _, x := range []struct {
		op approval.CondOp
		v  *float64
	}{{approval.OpGt, c.Gt}, {approval.OpGte, c.Gte}, {approval.OpLt, c.Lt}, {approval.OpLte, c.Lte}} {
		if x.v != nil {
			add(x.op, nil, *x.v)
		}
	}
	if c.Present != nil {
		if *c.Present {
			add(approval.OpPresent, nil, 0)
		} else {
			add(approval.OpAbsent, nil, 0)
		}
	}
	if c.Matches != nil {
		add(approval.OpMatches, []string{*c.Matches}, 0)
	}
	if len(out) != 1 {
		return approval.Condition{}, fmt.Errorf("condition on %q must have exactly one operator (eq, ne, in, not_in, gt, gte, lt, lte, present, matches), has %d", c.Attr, len(out))
	}
	if err := out[0].Validate(); err != nil {
		return approval.Condition{}, err
	}
	return out[0], nil
}

// Who names approvers by id and by group.
type Who struct {
	IDs    []string `yaml:"ids"`
	Groups []string `yaml:"groups"`
}

// routeRefs are the names routes may refer to, declared by other sections.
type routeRefs struct {
	approvers, groups, principals, webhooks map[string]bool
}

// validateRoutes checks the routes against the names the other sections
// declare.
func (f *File) validateRoutes(bad func(string, ...any), refs routeRefs) {
	approvers, groups, principals, webhooks := refs.approvers, refs.groups, refs.principals, refs.webhooks
	for i, r := range f.Routes {
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("routes[%d]", i)
		}
		if r.Match.Action != "" && !slices.Contains(knownActions, r.Match.Action) && !strings.HasSuffix(r.Match.Action, ".*") {
			bad("%s: match.action %q is not an action (%s)", name, r.Match.Action, strings.Join(knownActions, ", "))
		}
		if r.Match.Principal != "" && !principals[r.Match.Principal] {
			bad("%s: match.principal %q is not a principal", name, r.Match.Principal)
		}
		if r.Match.Target != "" {
			if why := f.checkTarget(r.Match.Action, r.Match.Target); why != "" {
				bad("%s: %s", name, why)
			}
		}
		if r.Match.Target != "" && r.Match.Action != "" && !onTargets(r.Match.Action) {
			bad("%s: match.target applies to %s, not %s", name, strings.Join(targetActions, ", "), r.Match.Action)
		}
		if r.Match.Tool != "" && r.Match.Action != "" && !onToolCalls(r.Match.Action) {
			bad("%s: match.tool applies to %s, not %s", name, strings.Join(toolCallActions, ", "), r.Match.Action)
		}
		if r.Match.Action == mcpcall.Name && r.Match.Tool != "" {
			if why := f.checkMCPTool(r.Match.Target, r.Match.Tool); why != "" {
				bad("%s: %s", name, why)
			}
		}
		for j, c := range r.Match.When {
			if _, err := c.Condition(); err != nil {
				bad("%s: match.when[%d]: %v", name, j, err)
			}
		}
		seenAttr := map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(r.Match.Attrs)) {
			n, err := approval.AttrName(k)
			switch {
			case err != nil:
				bad("%s: match.attrs: %v", name, err)
			case seenAttr[n] != "":
				bad("%s: match.attrs: %q and %q name the same attribute", name, seenAttr[n], k)
			default:
				seenAttr[n] = k
			}
		}
		for _, id := range r.Approvers.IDs {
			if !approvers[id] {
				bad("%s: approver %q is not defined", name, id)
			}
		}
		for _, g := range r.Approvers.Groups {
			if !groups[g] {
				bad("%s: no approver is in group %q", name, g)
			}
		}
		if len(r.Approvers.IDs)+len(r.Approvers.Groups) == 0 {
			bad("%s: approvers must name ids or groups", name)
		}
		if r.Required < 0 {
			bad("%s: required must be at least 1", name)
		}
		if ttl := time.Duration(r.ApprovalTTL); ttl != 0 && (ttl < approval.MinApprovalTTL || ttl > approval.MaxApprovalTTL) {
			bad("%s: approval_ttl %s must be between 1m and 7d", name, ttl)
		}
		if len(r.Notify) == 0 {
			bad("%s: notify must name at least one channel", name)
		}
		ttl := time.Duration(r.ApprovalTTL)
		if ttl == 0 {
			ttl = approval.DefaultApprovalTTL
		}
		for j, d := range r.Remind {
			if time.Duration(d) <= 0 || time.Duration(d) >= ttl || (j > 0 && d <= r.Remind[j-1]) {
				bad("%s: remind must be increasing intervals within the approval window (%s): %s", name, ttl, time.Duration(d))
			}
		}
		if len(r.Remind) > 10 {
			bad("%s: remind lists at most 10 reminders", name)
		}
		if e := r.Escalate; e != nil {
			if time.Duration(e.After) <= 0 || time.Duration(e.After) >= ttl {
				bad("%s: escalate.after must be within the approval window (%s)", name, ttl)
			}
			if len(e.Approvers.IDs)+len(e.Approvers.Groups) == 0 {
				bad("%s: escalate.approvers must name ids or groups", name)
			}
			for _, id := range e.Approvers.IDs {
				if !approvers[id] {
					bad("%s: escalate: approver %q is not defined", name, id)
				}
			}
			for _, g := range e.Approvers.Groups {
				if !groups[g] {
					bad("%s: escalate: no approver is in group %q", name, g)
				}
			}
		}
		if r.Allowances != "" && r.Allowances != "allow" && r.Allowances != "never" {
			bad("%s: allowances is allow or never, not %q", name, r.Allowances)
		}
		for _, n := range r.Notify {
			if err := checkNotify(n, webhooks); err != nil {
				bad("%s: %v", name, err)
			}
		}
		if r.StepUp != "" && r.StepUp != approval.StepUpPasskey {
			bad("%s: step_up %q must be passkey (or left out)", name, r.StepUp)
		}
	}
}
