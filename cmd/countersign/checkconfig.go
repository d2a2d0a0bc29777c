package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
)

// checkConfig validates a policy file and prints what each route resolves
// to, so a reviewer sees who approves what before it goes live.
func checkConfig(args []string, env func(string) (string, bool), stdout io.Writer) error {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	action := fs.String("action", "", "explain the route of a sample operation of this action")
	principal := fs.String("principal", "", "… prepared by this principal")
	var attrs attrFlags
	fs.Var(&attrs, "attr", "… with this attribute (key=value, repeatable; e.g. target=calendar)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	path := fs.Arg(0)
	if path == "" {
		path, _ = env("COUNTERSIGN_CONFIG")
	}
	if path == "" {
		return fmt.Errorf("name a file, or set COUNTERSIGN_CONFIG")
	}
	f, err := config.Load(path)
	if err != nil {
		return err
	}
	p := f.Policy()
	fmt.Fprintf(stdout, "%s: valid\n\n", path)

	fmt.Fprintf(stdout, "Approvers (%d):\n", len(p.Approvers))
	for _, a := range p.Approvers {
		var ch []string
		if a.Email != "" {
			ch = append(ch, "email "+a.Email)
		}
		if a.SlackUserID != "" {
			ch = append(ch, "slack "+a.SlackUserID)
		}
		fmt.Fprintf(stdout, "  %-14s %-20s groups=%s  %s\n", a.ID, a.DisplayName(), strings.Join(a.Groups, ","), strings.Join(ch, ", "))
	}
	fmt.Fprintf(stdout, "\nRoutes, first match wins (%d):\n", len(f.Routes))
	for i, r := range p.Routes {
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("route %d", i+1)
		}
		var who []string
		for _, a := range p.Approvers {
			if contains(r.ApproverIDs, a.ID) || overlap(a.Groups, r.ApproverGroups) {
				who = append(who, a.ID)
			}
		}
		ttl := r.ApprovalTTL
		if ttl == 0 {
			ttl = approval.DefaultApprovalTTL
		}
		fmt.Fprintf(stdout, "  %d. %s\n     match:     %s\n     approvers: %s (required %d)\n     notify:    %s\n     window:    %s",
			i+1, name, describeMatch(r.Match), strings.Join(who, ", "), max(r.Required, 1), strings.Join(r.Notify, ", "), ttl)
		if r.ForbidSelfApproval {
			fmt.Fprint(stdout, "; the human an agent acts for cannot approve")
		}
		fmt.Fprintln(stdout)
	}

	fmt.Fprintf(stdout, "\nPrincipals (%d):\n", len(p.Principals))
	for _, pr := range p.Principals {
		fmt.Fprintf(stdout, "  %s", pr.ID)
		if pr.OnBehalfOf != "" {
			fmt.Fprintf(stdout, " (on behalf of %s)", pr.OnBehalfOf)
		}
		fmt.Fprintln(stdout)
		for _, sc := range pr.Scopes {
			act, target, _ := strings.Cut(sc, ":")
			a := map[string]string{}
			if target != "" {
				a["target"] = target
			}
			fmt.Fprintf(stdout, "    %-28s → %s\n", sc, explain(p, act, pr, a))
		}
	}
	if *action != "" {
		pr := p.Principal(*principal)
		if pr == nil {
			return fmt.Errorf("--principal %q is not a principal of this file", *principal)
		}
		fmt.Fprintf(stdout, "\nSample: %s by %s %v\n  → %s\n", *action, pr.ID, map[string]string(attrs), explain(p, *action, pr, attrs))
	}
	return nil
}

func explain(p *approval.Policy, action string, pr *approval.Principal, attrs map[string]string) string {
	if action == "*" {
		return "every action (see routes)"
	}
	r, err := p.Resolve(action, pr, attrs)
	if err != nil {
		return "REFUSED: " + err.Error()
	}
	return fmt.Sprintf("route %q: %d of [%s] via %s, within %s", r.Name, r.Required, strings.Join(r.Approvers, ", "),
		strings.Join(r.Notify, ", "), r.ApprovalTTL)
}

func describeMatch(m approval.Match) string {
	var parts []string
	if m.Action != "" {
		parts = append(parts, "action="+m.Action)
	}
	if m.Principal != "" {
		parts = append(parts, "principal="+m.Principal)
	}
	for k, v := range m.Attrs {
		parts = append(parts, k+"="+v)
	}
	if len(parts) == 0 {
		return "everything"
	}
	return strings.Join(parts, " ")
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func overlap(a, b []string) bool {
	for _, x := range a {
		if contains(b, x) {
			return true
		}
	}
	return false
}

type attrFlags map[string]string

func (a *attrFlags) String() string { return fmt.Sprint(map[string]string(*a)) }
func (a *attrFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want key=value")
	}
	if *a == nil {
		*a = map[string]string{}
	}
	(*a)[k] = v
	return nil
}
