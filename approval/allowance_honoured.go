package approval

import (
	"fmt"
	"slices"
)

// RuleAllowanceNotHonoured is the details.rule of an allowance request
// that no route would honour.
const RuleAllowanceNotHonoured = "allowance_not_honoured"

// checkHonoured refuses an allowance every operation of which would be
// irreversible (IrreversibleOps: every email.send, an http.request pinned
// to POST or DELETE) when no route those operations could take says
// allowances: allow: the human would approve it and it would then be
// silently ignored at every send. When only some of its operations would
// be irreversible and no such route says allow, it returns the sentence
// the preview carries so that the human is not shown more than it does.
func (s *Service) checkHonoured(p *Principal, in AllowanceInput) (string, error) {
	io, ok := s.actions[in.Action].(IrreversibleOps)
	if !ok {
		return "", nil
	}
	pinned := map[string][]string{}
	for k, l := range in.Match {
		if len(l.In) > 0 {
			pinned[k] = l.In
		}
	}
	all, some := io.Irreversible(pinned)
	if !all && some == "" {
		return "", nil
	}
	reached, honoured := s.routesReached(p, in)
	if honoured || len(reached) == 0 {
		// no route at all: its operations fail with no_route, as without an allowance
		return "", nil
	}
	if !all {
		return fmt.Sprintf("It never approves %s (they cannot be undone): route %s does not say allowances: allow, so those still go to a person.",
			some, quoteJoin(reached)), nil
	}
	e := PolicyDenied(RuleAllowanceNotHonoured,
		"every %s it covers is irreversible and its route (%s) does not say allowances: allow, so this allowance would never approve anything; ask for approval per operation, or have the policy's owner add allowances: allow to the route",
		in.Action, quoteJoin(reached))
	e.Details["routes"] = reached
	return "", e
}

// routesReached lists the routes an operation the allowance covers could
// take, in order, up to the first that surely takes every one of them, or
// says honoured when one of them says allowances: allow. A route counts
// when its action and principal fit and its attribute matches agree with
// the values the allowance allows (conditions are not read: a route only
// they would rule out still counts, which errs towards accepting).
func (s *Service) routesReached(p *Principal, in AllowanceInput) (reached []string, honoured bool) {
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
		if m.Tool != "" {
			want["tool"] = m.Tool
		}
		sure, possible := len(m.When) == 0, true
		for k, v := range want {
			l, isPinned := in.Match[k]
			switch {
			case !isPinned || len(l.In) == 0:
				sure = false
			case listAttrs[k] && len(l.In) > 1:
				// a list attribute's elements are each one of In: the
				// whole list may be any combination of them
				sure = false
			case !slices.Contains(l.In, v):
				possible = false
			case len(l.In) > 1:
				sure = false
			}
		}
		if !possible {
			continue
		}
		if r.Allowances {
			return reached, true
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
	return reached, false
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
