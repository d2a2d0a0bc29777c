package approval

import "fmt"

// RuleAllowanceNotHonoured is the details.rule of an allowance request
// that no route would honour.
const RuleAllowanceNotHonoured = "allowance_not_honoured"

// checkHonoured refuses an allowance for an always-irreversible action
// when no route its operations could take says allowances: allow: the
// human would approve it and it would then be silently ignored at every
// send. A route counts when its action and principal fit and its attribute
// matches agree with the values the allowance pins; routes after one that
// surely takes every covered operation are never reached.
func (s *Service) checkHonoured(p *Principal, in AllowanceInput) error {
	ai, ok := s.actions[in.Action].(AlwaysIrreversible)
	if !ok || !ai.AlwaysIrreversible() {
		return nil
	}
	pinned := map[string]string{}
	for k, l := range in.Match {
		if len(l.In) == 1 && l.Min == nil && l.Max == nil {
			pinned[k] = l.In[0]
		}
	}
	var reached []string
	for i, r := range s.policy.Routes {
		m := r.Match
		if ok, _ := (Match{Action: m.Action, Principal: m.Principal}).Check(in.Action, p.ID, nil); !ok {
			continue
		}
		want := map[string]string{}
		for k, v := range m.Attrs {
			want[k] = v
		}
		if m.Target != "" {
			want["target"] = m.Target
		}
		sure, possible := len(m.When) == 0, true
		for k, v := range want {
			got, isPinned := pinned[k]
			switch {
			case isPinned && got != v:
				possible = false
			case !isPinned:
				sure = false
			}
		}
		if !possible {
			continue
		}
		if r.Allowances {
			return nil
		}
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("route %d", i+1)
		}
		reached = append(reached, name)
		if sure {
			break
		}
	}
	if len(reached) == 0 {
		return nil // no route at all: its operations fail with no_route, as without an allowance
	}
	e := PolicyDenied(RuleAllowanceNotHonoured,
		"every %s is irreversible and its route (%s) does not say allowances: allow, so this allowance would never approve anything; ask for approval per operation, or have the policy's owner add allowances: allow to the route",
		in.Action, quoteJoin(reached))
	e.Details["routes"] = reached
	return e
}

func quoteJoin(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%q", n)
	}
	return out
}
