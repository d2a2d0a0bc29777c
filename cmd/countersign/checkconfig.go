package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/countersign/countersign/action/httpreq"
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
	input := fs.String("input", "", "… with this input (JSON); for http.request its route attributes are worked out offline")
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

	if len(f.Targets) > 0 {
		fmt.Fprintf(stdout, "\nHTTP targets (%d):\n", len(f.Targets))
		for _, t := range f.Targets {
			describeTarget(stdout, t)
		}
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
		sample := map[string]string{}
		if *input != "" {
			if *action != httpreq.Name {
				return fmt.Errorf("--input is understood for %s only; give other actions' attributes with --attr", httpreq.Name)
			}
			a, err := httpreq.SampleAttrs(json.RawMessage(*input))
			if err != nil {
				return fmt.Errorf("--input: %v", err)
			}
			sample = a
		}
		for k, v := range attrs {
			sample[k] = v
		}
		explainSample(stdout, p, *action, pr, sample)
	}
	return nil
}

// explainSample prints the route a sample operation resolves to, and why
// each earlier route was passed over.
func explainSample(w io.Writer, p *approval.Policy, action string, pr *approval.Principal, attrs map[string]string) {
	fmt.Fprintf(w, "\nSample: %s by %s\n", action, pr.ID)
	if len(attrs) > 0 {
		fmt.Fprintln(w, "  attributes:")
		for _, k := range slices.Sorted(maps.Keys(attrs)) {
			fmt.Fprintf(w, "    %s = %q\n", k, attrs[k])
		}
	}
	scope := action
	if t := attrs["target"]; action == httpreq.Name && t != "" {
		scope = httpreq.Scope(t)
	}
	if !pr.Allows(scope) {
		fmt.Fprintf(w, "  → REFUSED: insufficient_scope: %s may not prepare %s\n", pr.ID, scope)
		return
	}
	for _, c := range p.Explain(action, pr, attrs) {
		if c.Matched {
			fmt.Fprintf(w, "  %s: matches\n", c.Name)
		} else {
			fmt.Fprintf(w, "  %s: skipped, %s\n", c.Name, c.Why)
		}
	}
	fmt.Fprintf(w, "  → %s\n", explain(p, action, pr, attrs))
}

// describeTarget prints a target without its header values.
func describeTarget(w io.Writer, t config.TargetSpec) {
	var allow []string
	for _, a := range t.Allow {
		allow = append(allow, a.Method+" "+a.Path)
	}
	fmt.Fprintf(w, "  %s  %s\n     allow:   %s\n", t.Name, t.BaseURL, strings.Join(allow, ", "))
	if len(t.Headers) > 0 {
		fmt.Fprintf(w, "     headers: %s (values from the environment, never shown)\n", strings.Join(slices.Sorted(maps.Keys(t.Headers)), ", "))
	}
	switch {
	case !t.Reads():
		fmt.Fprintln(w, "     state:   not read (writes are not bound to state)")
	case len(t.State.Fields) > 0:
		fmt.Fprintf(w, "     state:   %s, plus the fields each write sets\n", strings.Join(t.State.Fields, ", "))
	default:
		fmt.Fprintln(w, "     state:   the fields each write sets")
	}
	if t.Private() {
		fmt.Fprintln(w, "     private addresses allowed")
	}
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

func describeMatch(m approval.Match) string { return m.String() }

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
