package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
	"github.com/spf13/cobra"
)

func init() { register(newCheckConfigCmd) }

// sample is the operation check-config explains the route of.
type sample struct {
	action, principal, input string
	attrs                    attrFlags
	// env, when set (--env), lists the environment serve needs and fails
	// when a required variable is missing from it.
	env func(string) (string, bool)
	// upstreams, when set (--upstreams), starts the upstreams with this
	// environment and lists every tool as pass, guarded or hidden.
	upstreams func(string) (string, bool)
}

func newCheckConfigCmd(c *cli) *cobra.Command {
	var s sample
	var withEnv, withUpstreams bool
	cmd := &cobra.Command{
		Use:   "check-config [FILE]",
		Short: "Validate a policy file and print what each route resolves to",
		Long: `countersign check-config validates a policy file (FILE, or COUNTERSIGN_CONFIG) and
prints its approvers, routes, HTTP targets, MCP upstreams (transport, pass, hide,
state bindings, limits) and principals, so a reviewer sees who approves what before
it goes live. It needs none of the secrets the file refers to.

With --action and --principal it explains which route a sample operation takes and
why each earlier route was skipped; give its attributes with --attr (for mcp.call:
target=UPSTREAM, tool=TOOL, args.PATH=VALUE), or for http.request its input with
--input.

With --env it also lists every environment variable serve needs with this file
(each ${VAR} reference, the credentials of the channels the routes notify and of
the actions scopes and routes name), set or MISSING, never their values, and
exits 1 naming all the missing ones at once, and every action a scope or route
names that serve would not configure (email.send without COUNTERSIGN_SMTP_URL,
slack.* without Slack), as serve refuses to start with one.

With --upstreams it also starts each MCP upstream as serve would, waits up to 30 s
for their tool lists, and lists every tool as pass, guarded or hidden (or not
offered, and why); it exits 1 when an upstream cannot be reached.`,
		Example: `  countersign check-config countersign.yaml
  countersign check-config countersign.yaml --action http.request --principal support-agent --attr target=billing
  countersign check-config --action http.request --principal support-agent \
    --input '{"target":"billing","method":"POST","path":"/invoices","body":{"amount":5000}}' countersign.yaml`,
		Args: argsUsage(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := c.get("COUNTERSIGN_CONFIG")
			if len(args) == 1 {
				path = args[0]
			}
			if path == "" {
				return usagef("name a policy file (countersign check-config FILE), or set COUNTERSIGN_CONFIG")
			}
			if s.action == "" && (s.principal != "" || s.input != "" || len(s.attrs) > 0) {
				return usagef("--principal, --attr and --input describe a sample operation: add --action ACTION")
			}
			if s.action != "" && s.principal == "" {
				return usagef("--action needs --principal: the sample operation is prepared by one of the file's principals")
			}
			if withUpstreams {
				s.upstreams = func(n string) (string, bool) { v := c.get(n); return v, v != "" }
			}
			if withEnv {
				s.env = func(n string) (string, bool) { v := c.get(n); return v, v != "" }
			}
			return checkConfig(path, s, c.stdout)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&withUpstreams, "upstreams", false, "also start the MCP upstreams and list every tool each offers as pass, guarded or hidden")
	f.BoolVar(&withEnv, "env", false, "also list every environment variable and secret serve needs with this file, and exit 1 if any is missing")
	f.StringVar(&s.action, "action", "", "explain the route of a sample operation of this action (e.g. email.send, http.request)")
	f.StringVar(&s.principal, "principal", "", "… prepared by this principal")
	f.Var(&s.attrs, "attr", "… with this attribute, key=value (repeatable; e.g. --attr target=calendar)")
	f.StringVar(&s.input, "input", "", "… with this input (JSON); for http.request its route attributes are worked out offline")
	return cmd
}

// checkConfig validates a policy file and prints what each route resolves
// to, so a reviewer sees who approves what before it goes live.
func checkConfig(path string, s sample, stdout io.Writer) error {
	action, principal, input, attrs := &s.action, &s.principal, &s.input, s.attrs
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
		if a.TeamsUserID != "" {
			ch = append(ch, "teams "+a.TeamsUserID)
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
		if r.StepUp != "" {
			fmt.Fprint(stdout, "\n     step-up:   "+r.StepUp+" (every decision needs the approver's passkey; chat buttons open the page)")
		}
		fmt.Fprintln(stdout)
	}

	if len(f.Targets) > 0 {
		fmt.Fprintf(stdout, "\nHTTP targets (%d):\n", len(f.Targets))
		for _, t := range f.Targets {
			describeTarget(stdout, t)
		}
	}

	if len(f.Upstreams) > 0 {
		fmt.Fprintf(stdout, "\nMCP upstreams (%d):\n", len(f.Upstreams))
		for _, u := range f.Upstreams {
			describeUpstream(stdout, u)
		}
	}

	fmt.Fprintf(stdout, "\nPrincipals (%d):\n", len(p.Principals))
	for _, pr := range p.Principals {
		fmt.Fprintf(stdout, "  %s", pr.ID)
		if pr.OnBehalfOf != "" {
			fmt.Fprintf(stdout, " (on behalf of %s)", pr.OnBehalfOf)
		}
		fmt.Fprintln(stdout)
		for _, ps := range f.Principals {
			if ps.ID == pr.ID && ps.CallbackURL != "" {
				// The host only: a path or query may carry a token.
				if u, err := url.Parse(ps.CallbackURL); err == nil {
					fmt.Fprintf(stdout, "    status webhook → %s://%s (signed with %s)\n", u.Scheme, u.Host, ps.CallbackSecret)
				}
			}
		}
		for _, sc := range pr.Scopes {
			act, target, _ := strings.Cut(sc, ":")
			a := map[string]string{}
			if upstream, tool, ok := config.MCPScope(sc); ok {
				act, target = mcpcall.Name, upstream
				if tool != "" {
					a["tool"] = tool
				}
			}
			if target != "" {
				a["target"] = target
			}
			fmt.Fprintf(stdout, "    %-28s → %s\n", sc, explain(p, act, pr, a))
		}
	}
	if *action != "" {
		pr := p.Principal(*principal)
		if pr == nil {
			return usagef("--principal %q is not a principal of %s; its principals: %s", *principal, path, principalIDs(p))
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
	if s.env != nil {
		needs, err := envNeeds(path, f)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		var errs []string
		if missing := printEnvNeeds(stdout, needs, s.env); len(missing) > 0 {
			errs = append(errs, fmt.Sprintf("%d environment variable(s) that serve needs with %s are not set: %s", len(missing), path, strings.Join(missing, ", ")))
		}
		if err := unconfiguredActions(f, configuredByEnv(f, s.env)); err != nil {
			errs = append(errs, err.Error())
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "\n"))
		}
	}
	if s.upstreams != nil {
		return listUpstreams(stdout, f, s.upstreams)
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
			fmt.Fprintf(w, "    %s = %s\n", k, approval.DescribeAttrValue(attrs[k]))
		}
	}
	scope := action
	allowed := pr.Allows(scope)
	switch t := attrs["target"]; {
	case action == httpreq.Name && t != "":
		scope = httpreq.Scope(t)
		allowed = pr.Allows(scope)
	case action == mcpcall.Name:
		// mcp:NAME allows every tool of the upstream, mcp:NAME/TOOL one.
		scope = mcpcall.ScopeBase + ":" + t
		allowed = t != "" && pr.Allows(scope)
		if t == "" {
			scope = action + " without an upstream (give it with --attr target=NAME)"
		}
		if tool := attrs["tool"]; tool != "" && !allowed {
			scope += "/" + tool
			allowed = pr.Allows(scope)
		}
	}
	if !allowed {
		fmt.Fprintf(w, "  → REFUSED: insufficient_scope: %s may not prepare %s\n", pr.ID, scope)
		return
	}
	for _, c := range p.Explain(action, pr, attrs) {
		if c.Matched {
			if c.Why != "" {
				fmt.Fprintf(w, "  %s: matches, %s\n", c.Name, c.Why)
			} else {
				fmt.Fprintf(w, "  %s: matches\n", c.Name)
			}
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
		rule := a.Method + " " + a.Path
		if len(a.Query) > 0 {
			rule += " (query: " + strings.Join(a.Query, ", ") + ")"
		}
		allow = append(allow, rule)
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

// describeUpstream prints an upstream without its env and header values.
func describeUpstream(w io.Writer, u config.UpstreamSpec) {
	if u.Stdio() {
		args := make([]string, len(u.Command))
		for i, a := range u.Command {
			args[i] = a
			if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
				args[i] = strconv.Quote(a)
			}
		}
		fmt.Fprintf(w, "  %s  stdio: %s\n", u.Name, strings.Join(args, " "))
	} else {
		fmt.Fprintf(w, "  %s  streamable HTTP: %s\n", u.Name, u.URL)
	}
	if len(u.Env) > 0 {
		fmt.Fprintf(w, "     env:     %s (values never shown)\n", strings.Join(slices.Sorted(maps.Keys(u.Env)), ", "))
	}
	if len(u.Headers) > 0 {
		fmt.Fprintf(w, "     headers: %s (values from the environment, never shown)\n", strings.Join(slices.Sorted(maps.Keys(u.Headers)), ", "))
	}
	list := func(tools []string, what string) string {
		if len(tools) == 0 {
			return "none"
		}
		return strings.Join(tools, ", ") + " (" + what + ")"
	}
	fmt.Fprintf(w, "     pass:    %s\n", list(u.Pass, "run at once, no approval"))
	fmt.Fprintf(w, "     hide:    %s\n", list(u.Hide, "never offered to agents"))
	fmt.Fprintln(w, "     guarded: every other tool, including any the upstream adds later (a human approves each call)")
	for i, g := range slices.Sorted(maps.Keys(u.State)) {
		st := u.State[g]
		var args []string
		for _, k := range slices.Sorted(maps.Keys(st.Args)) {
			args = append(args, k+": "+strconv.Quote(st.Args[k]))
		}
		line := fmt.Sprintf("%s is bound to %s(%s)", g, st.Tool, strings.Join(args, ", "))
		if st.Diff != "" {
			line += ", shown as a diff against its argument " + st.Diff
		}
		label := "state:  "
		if i > 0 {
			label = "        "
		}
		fmt.Fprintf(w, "     %s %s\n", label, line)
	}
	fmt.Fprintf(w, "     limits:  results up to %s, %d pass calls a minute per principal, %s per call\n",
		byteSize(u.ResultLimit()), u.Rate(), u.CallTimeout())
}

// byteSize writes n as the policy file would: 1MiB, 64KiB, 1000 bytes.
func byteSize(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
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

func principalIDs(p *approval.Policy) string {
	var ids []string
	for _, pr := range p.Principals {
		ids = append(ids, pr.ID)
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
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

func (a *attrFlags) String() string {
	if len(*a) == 0 {
		return ""
	}
	return fmt.Sprint(map[string]string(*a))
}
func (a *attrFlags) Type() string { return "key=value" }
func (a *attrFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, e.g. target=billing")
	}
	if *a == nil {
		*a = map[string]string{}
	}
	(*a)[k] = v
	return nil
}
