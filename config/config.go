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
	"strings"

	"gopkg.in/yaml.v3"
)

// File is the policy file as written.
type File struct {
	Principals []PrincipalSpec `yaml:"principals"`
	Operators  []OperatorSpec  `yaml:"operators"`
	Approvers  []ApproverSpec  `yaml:"approvers"`
	Routes     []RouteSpec     `yaml:"routes"`
	Limits     LimitsSpec      `yaml:"limits"`
	Targets    []TargetSpec    `yaml:"targets"`
	// Upstreams are the MCP servers the gateway guards (SPEC §12,
	// config/upstreams.go).
	Upstreams []UpstreamSpec `yaml:"upstreams"`
	Webhooks  []WebhookSpec  `yaml:"webhooks"`
	Settings  SettingsSpec   `yaml:"settings"`
	// OIDC turns on sign-in to the approver inbox and the operator
	// console (config/oidc.go).
	OIDC *OIDCSpec `yaml:"oidc"`
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
	idPattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	hexPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	envRef     = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// ValidID reports whether s is a valid id of principals, operators,
// approvers and targets.
func ValidID(s string) bool { return idPattern.MatchString(s) }

func (f *File) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// One validator per section, each in the section's file; later
	// sections refer to the ids the earlier ones declared.
	approvers, groups := f.validateApprovers(bad)
	principals := f.validatePrincipals(bad, approvers)
	f.validateOperators(bad)
	webhooks := f.validateWebhooks(bad)
	f.validateRoutes(bad, routeRefs{approvers: approvers, groups: groups, principals: principals, webhooks: webhooks})
	f.validateOIDC(bad)
	f.validateTargets(bad)
	f.validateUpstreams(bad)
	f.validateSettings(bad)
	f.validateLimits(bad)
	return errors.Join(errs...)
}

// uniqueID checks the id of the i-th entry of a list and records it.
func uniqueID(bad func(string, ...any), list string, i int, id string, seen map[string]bool) {
	if !idPattern.MatchString(id) {
		bad("%s[%d]: id %q must be lowercase letters, digits, '_', '.', '-'", list, i, id)
	}
	if seen[id] {
		bad("%s[%d]: duplicate id %q", list, i, id)
	}
	seen[id] = true
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
