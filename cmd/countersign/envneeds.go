package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/config"
)

// envNeed is one environment variable serve needs with a policy file.
type envNeed struct {
	Name string
	// Any lists alternatives: one of Name or these satisfies the need.
	Any []string
	// Recommended needs only make serve warn when missing.
	Recommended bool
	// Ref: the policy file refers to it as ${NAME}.
	Ref bool
	By  []string // what needs it
}

var envRefRe = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// envNeeds lists every variable serve needs with the policy file at path:
// each ${VAR} reference (by line), the credentials of each channel the
// routes notify and of each action a scope or route names, and the
// service's own settings that it only warns about.
func envNeeds(path string, f *config.File) ([]envNeed, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var needs []envNeed
	add := func(n envNeed, by string) {
		for i := range needs {
			if needs[i].Name == n.Name {
				if !slices.Contains(needs[i].By, by) {
					needs[i].By = append(needs[i].By, by)
				}
				needs[i].Recommended = needs[i].Recommended && n.Recommended
				needs[i].Ref = needs[i].Ref || n.Ref
				return
			}
		}
		n.By = []string{by}
		needs = append(needs, n)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if i := strings.Index(text, "#"); i >= 0 && !strings.Contains(text[:i], "${") && strings.TrimSpace(text[:i]) == "" {
			continue // a comment line
		}
		for _, m := range envRefRe.FindAllStringSubmatch(text, -1) {
			add(envNeed{Name: m[1], Ref: true}, fmt.Sprintf("${%s} at %s line %d", m[1], path, line))
		}
	}
	for _, u := range f.Upstreams {
		for _, kv := range []struct {
			kind   string
			values map[string]string
		}{{"env", u.Env}, {"header", u.Headers}} {
			for _, k := range slices.Sorted(maps.Keys(kv.values)) {
				for _, m := range envRefRe.FindAllStringSubmatch(kv.values[k], -1) {
					add(envNeed{Name: m[1], Ref: true}, fmt.Sprintf("upstream %s %s %s", u.Name, kv.kind, k))
				}
			}
		}
	}
	for _, ch := range f.Channels() {
		switch ch {
		case "slack":
			add(envNeed{Name: "SLACK_BOT_TOKEN"}, "routes notify slack")
			add(envNeed{Name: "SLACK_SIGNING_SECRET", Any: []string{"SLACK_APP_TOKEN"}}, "routes notify slack")
		case "teams":
			add(envNeed{Name: "TEAMS_APP_ID"}, "routes notify teams")
			add(envNeed{Name: "TEAMS_APP_PASSWORD"}, "routes notify teams")
		case "email":
			add(envNeed{Name: "COUNTERSIGN_SMTP_URL"}, "routes notify email")
		}
	}
	for _, a := range namedActions(f) {
		switch {
		case a.action == "email.send":
			add(envNeed{Name: "COUNTERSIGN_SMTP_URL"}, a.by+" names email.send")
		case strings.HasPrefix(a.action, "slack."):
			add(envNeed{Name: "SLACK_BOT_TOKEN"}, a.by+" names "+a.action)
		}
	}
	add(envNeed{Name: "COUNTERSIGN_REDIS_URL", Recommended: true}, "the store (without it: an in-memory Redis, lost on exit)")
	add(envNeed{Name: "COUNTERSIGN_PUBLIC_URL", Recommended: true}, "approval links and receipts (without it: the listen address)")
	add(envNeed{Name: "COUNTERSIGN_LINK_KEYS", Recommended: true}, "approval links (without it: a random key per process)")
	add(envNeed{Name: "COUNTERSIGN_RECEIPT_KEYS", Recommended: true}, "receipts (without it: a generated key per process)")
	return needs, nil
}

type namedAction struct{ action, by string }

// namedActions is each concrete action a principal's scope or a route's
// match names (wildcards name no particular action).
func namedActions(f *config.File) []namedAction {
	var out []namedAction
	for _, p := range f.Principals {
		for _, s := range p.Scopes {
			a, _, _ := strings.Cut(s, ":")
			if a == mcpcall.ScopeBase {
				a = mcpcall.Name // mcp:NAME allows mcp.call
			}
			if a != "" && !strings.Contains(a, "*") {
				out = append(out, namedAction{a, "principal " + p.ID})
			}
		}
	}
	for i, r := range f.Routes {
		if a := r.Match.Action; a != "" && !strings.Contains(a, "*") {
			name := r.Name
			if name == "" {
				name = fmt.Sprintf("%d", i+1)
			}
			out = append(out, namedAction{a, "route " + name})
		}
	}
	return out
}

// printEnvNeeds writes one line per variable, set or MISSING (never its
// value), and returns the required ones that are missing.
func printEnvNeeds(w io.Writer, needs []envNeed, lookup func(string) (string, bool)) []string {
	set := func(n string) bool { v, ok := lookup(n); return ok && v != "" }
	var missing []string
	fmt.Fprintf(w, "Environment (%d):\n", len(needs))
	for _, n := range needs {
		name, ok := n.Name, set(n.Name)
		for _, alt := range n.Any {
			name += " or " + alt
			ok = ok || set(alt)
		}
		state := "set"
		switch {
		case !ok && n.Recommended:
			state = "not set (serve warns)"
		case !ok:
			state = "MISSING"
			missing = append(missing, name)
		}
		fmt.Fprintf(w, "  %s: %s — needed by %s\n", name, state, strings.Join(n.By, "; "))
	}
	return missing
}

// checkEnv fails the start of serve naming every ${VAR} reference of the
// policy file that is not set, all at once (rather than the first one a
// component happens to expand). Channel credentials keep their own,
// more specific start errors (slack.go, teams.go, email.go). It checks
// presence only: a configured part that is down is a run-time matter.
func (m *Main) checkEnv(path string, f *config.File) error {
	needs, err := envNeeds(path, f)
	if err != nil {
		return err
	}
	lookup := func(n string) (string, bool) { v := m.get(n, ""); return v, v != "" }
	var lines []string
	for _, n := range needs {
		if !n.Ref {
			continue
		}
		ok := func() bool {
			for _, name := range append([]string{n.Name}, n.Any...) {
				if _, ok := lookup(name); ok {
					return true
				}
			}
			return false
		}()
		if !ok {
			lines = append(lines, fmt.Sprintf("  %s (needed by %s)", strings.Join(append([]string{n.Name}, n.Any...), " or "), strings.Join(n.By, "; ")))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("%d environment variable(s) that %s needs are not set:\n%s\n(countersign check-config --env %s lists them all)",
		len(lines), path, strings.Join(lines, "\n"), path)
}
