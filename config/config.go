// Package config reads the YAML policy file (COUNTERSIGN_CONFIG) into the
// domain's policy and the settings of actions and channels. Secrets are
// never literals in the file: values that carry credentials are written as
// ${ENV_VAR} and resolved from the environment at load time.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"gopkg.in/yaml.v3"
)

// File is the policy file as written.
type File struct {
	Principals []PrincipalSpec `yaml:"principals"`
	Approvers  []ApproverSpec  `yaml:"approvers"`
	Routes     []RouteSpec     `yaml:"routes"`
	Limits     LimitsSpec      `yaml:"limits"`
	Targets    []TargetSpec    `yaml:"targets"`
	Webhooks   []WebhookSpec   `yaml:"webhooks"`
	Settings   SettingsSpec    `yaml:"settings"`
}

// LimitsSpec holds per-action limits.
type LimitsSpec struct {
	Email EmailLimits `yaml:"email.send"`
}

// EmailLimits bound email.send.
type EmailLimits struct {
	MaxRecipients  int      `yaml:"max_recipients"`
	AllowedDomains []string `yaml:"allowed_domains"`
}

// PrincipalSpec is an agent.
type PrincipalSpec struct {
	ID           string   `yaml:"id"`
	APIKeySHA256 string   `yaml:"api_key_sha256"`
	Scopes       []string `yaml:"scopes"`
	OnBehalfOf   string   `yaml:"on_behalf_of"`
}

// ApproverSpec is a human.
type ApproverSpec struct {
	ID          string   `yaml:"id"`
	Name        string   `yaml:"name"`
	Email       string   `yaml:"email"`
	SlackUserID string   `yaml:"slack_user_id"`
	Groups      []string `yaml:"groups"`
}

// RouteSpec is one route; the first that matches wins.
type RouteSpec struct {
	Name               string    `yaml:"name"`
	Match              MatchSpec `yaml:"match"`
	Approvers          Who       `yaml:"approvers"`
	Required           int       `yaml:"required"`
	Notify             []string  `yaml:"notify"`
	ApprovalTTL        Duration  `yaml:"approval_ttl"`
	ForbidSelfApproval bool      `yaml:"forbid_self_approval"`
}

// MatchSpec selects operations.
type MatchSpec struct {
	Action    string            `yaml:"action"`
	Principal string            `yaml:"principal"`
	Target    string            `yaml:"target"`
	Attrs     map[string]string `yaml:"attrs"`
}

// Who names approvers by id and by group.
type Who struct {
	IDs    []string `yaml:"ids"`
	Groups []string `yaml:"groups"`
}

// TargetSpec is an HTTP target for http.request.
type TargetSpec struct {
	Name    string            `yaml:"name"`
	BaseURL string            `yaml:"base_url"`
	Headers map[string]string `yaml:"headers"`
	Allow   []AllowSpec       `yaml:"allow"`
	State   StateSpec         `yaml:"state"`
	// AllowPrivate lets the target resolve to loopback or private
	// addresses (internal APIs, tests); off, such addresses are refused.
	AllowPrivate *bool `yaml:"allow_private"`
}

// AllowSpec is one allowed method and path pattern.
type AllowSpec struct {
	Method string `yaml:"method"`
	Path   string `yaml:"path"`
}

// StateSpec lists the fields of the target's resource an operation binds to.
type StateSpec struct {
	Fields []string `yaml:"fields"`
}

// WebhookSpec is a webhook channel.
type WebhookSpec struct {
	Name   string `yaml:"name"`
	URL    string `yaml:"url"`
	Secret string `yaml:"secret"` // ${ENV_VAR}
	// Links puts each approver's approval link in the notification.
	Links bool `yaml:"links"`
}

// SettingsSpec holds service-wide settings.
type SettingsSpec struct {
	DraftTTL  Duration `yaml:"draft_ttl"`
	Retention Duration `yaml:"retention"`
	EmailFrom string   `yaml:"email_from"`
}

// Duration accepts Go durations plus a "d" suffix for days ("7d").
type Duration time.Duration

// UnmarshalYAML parses "90s", "15m", "2h", "7d".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// ParseDuration parses a duration with an optional "d" (days) suffix.
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (use e.g. 90s, 15m, 2h, 7d)", s)
	}
	return v, nil
}

// Load reads and validates the file at path.
func Load(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(raw)
}

// Parse reads and validates a policy file. Unknown fields are errors, so a
// typo never silently weakens a policy.
func Parse(raw []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := f.validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

var (
	idPattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	hexPattern   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	envRef       = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	knownActions = []string{"email.send", "slack.post_message", "http.request"}
)

func (f *File) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	approvers := map[string]bool{}
	groups := map[string]bool{}
	for i, a := range f.Approvers {
		if !idPattern.MatchString(a.ID) {
			bad("approvers[%d]: id %q must be lowercase letters, digits, '_', '.', '-'", i, a.ID)
		}
		if approvers[a.ID] {
			bad("approvers[%d]: duplicate id %q", i, a.ID)
		}
		approvers[a.ID] = true
		for _, g := range a.Groups {
			groups[g] = true
		}
		if a.Email != "" && !strings.Contains(a.Email, "@") {
			bad("approvers[%d] %s: email %q is not an address", i, a.ID, a.Email)
		}
	}
	principals := map[string]bool{}
	for i, p := range f.Principals {
		if !idPattern.MatchString(p.ID) {
			bad("principals[%d]: id %q must be lowercase letters, digits, '_', '.', '-'", i, p.ID)
		}
		if principals[p.ID] {
			bad("principals[%d]: duplicate id %q", i, p.ID)
		}
		principals[p.ID] = true
		if !hexPattern.MatchString(p.APIKeySHA256) {
			bad("principals[%d] %s: api_key_sha256 must be 64 lowercase hex digits (countersign keygen prints it)", i, p.ID)
		}
		for _, s := range p.Scopes {
			base, target, _ := strings.Cut(s, ":")
			if s != "*" && !slices.Contains(knownActions, base) {
				bad("principals[%d] %s: unknown scope %q (actions: %s)", i, p.ID, s, strings.Join(knownActions, ", "))
			}
			if target != "" && base == "http.request" && !f.hasTarget(target) {
				bad("principals[%d] %s: scope %q names no configured target", i, p.ID, s)
			}
		}
		if p.OnBehalfOf != "" && !approvers[p.OnBehalfOf] {
			bad("principals[%d] %s: on_behalf_of %q is not an approver id", i, p.ID, p.OnBehalfOf)
		}
	}
	webhooks := map[string]bool{}
	for i, w := range f.Webhooks {
		if !idPattern.MatchString(w.Name) {
			bad("webhooks[%d]: name %q is not a valid name", i, w.Name)
		}
		webhooks[w.Name] = true
		if !strings.HasPrefix(w.URL, "https://") && !strings.HasPrefix(w.URL, "http://") {
			bad("webhooks[%d] %s: url must be http(s)", i, w.Name)
		}
		if w.Secret != "" && !envRef.MatchString(w.Secret) {
			bad("webhooks[%d] %s: secret must be a ${ENV_VAR} reference, never a literal", i, w.Name)
		}
	}
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
		if r.Match.Target != "" && !f.hasTarget(r.Match.Target) {
			bad("%s: match.target %q is not a target", name, r.Match.Target)
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
		for _, n := range r.Notify {
			if err := checkNotify(n, webhooks); err != nil {
				bad("%s: %v", name, err)
			}
		}
	}
	if d := time.Duration(f.Settings.DraftTTL); d != 0 && (d < approval.MinDraftTTL || d > approval.MaxDraftTTL) {
		bad("settings: draft_ttl %s must be between 1m and 60m", d)
	}
	return errors.Join(errs...)
}

func (f *File) hasTarget(name string) bool {
	for _, t := range f.Targets {
		if t.Name == name {
			return true
		}
	}
	return false
}

func checkNotify(n string, webhooks map[string]bool) error {
	ch, target, _ := strings.Cut(n, ":")
	switch ch {
	case "email", "console":
		if target != "" {
			return fmt.Errorf("notify %q: %s takes no target", n, ch)
		}
	case "slack":
		if target == "" {
			return fmt.Errorf("notify %q: use slack:#channel, slack:C0123ABC or slack:dm", n)
		}
	case "webhook":
		if !webhooks[target] {
			return fmt.Errorf("notify %q: no webhook named %q", n, target)
		}
	default:
		return fmt.Errorf("notify %q: unknown channel (email, console, slack:…, webhook:…)", n)
	}
	return nil
}

// Policy builds the domain policy.
func (f *File) Policy() *approval.Policy {
	p := &approval.Policy{}
	for _, a := range f.Approvers {
		p.Approvers = append(p.Approvers, &approval.Approver{ID: a.ID, Name: a.Name, Email: a.Email,
			SlackUserID: a.SlackUserID, Groups: a.Groups})
	}
	for _, pr := range f.Principals {
		p.Principals = append(p.Principals, &approval.Principal{ID: pr.ID, KeyHash: pr.APIKeySHA256,
			Scopes: pr.Scopes, OnBehalfOf: pr.OnBehalfOf})
	}
	for _, r := range f.Routes {
		attrs := map[string]string{}
		for k, v := range r.Match.Attrs {
			attrs[k] = v
		}
		if r.Match.Target != "" {
			attrs["target"] = r.Match.Target
		}
		p.Routes = append(p.Routes, approval.RouteRule{
			Name: r.Name, Match: approval.Match{Action: r.Match.Action, Principal: r.Match.Principal, Attrs: attrs},
			ApproverIDs: r.Approvers.IDs, ApproverGroups: r.Approvers.Groups, Required: r.Required,
			Notify: r.Notify, ApprovalTTL: time.Duration(r.ApprovalTTL), ForbidSelfApproval: r.ForbidSelfApproval,
		})
	}
	return p
}

// Channels lists the channels the routes use ("email", "slack", …).
func (f *File) Channels() []string {
	var out []string
	for _, r := range f.Routes {
		for _, n := range r.Notify {
			ch, _, _ := strings.Cut(n, ":")
			if !slices.Contains(out, ch) {
				out = append(out, ch)
			}
		}
	}
	return out
}

// Expand resolves ${ENV_VAR} references with lookup. A reference to an
// unset variable is an error, so a missing credential fails at start-up.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(m string) string {
		name := envRef.FindStringSubmatch(m)[1]
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}
