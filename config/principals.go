package config

import (
	"slices"
	"strings"

	"github.com/countersign/countersign/internal/netguard"
)

// PrincipalSpec is an agent.
type PrincipalSpec struct {
	ID           string     `yaml:"id"`
	APIKeySHA256 string     `yaml:"api_key_sha256"`
	Scopes       []string   `yaml:"scopes"`
	OnBehalfOf   string     `yaml:"on_behalf_of"`
	Quotas       QuotasSpec `yaml:"quotas"`
	// CallbackURL receives every status change of the principal's
	// operations as a signed POST (docs/status-webhooks.md): https, or
	// plain http to a loopback host; no credentials in it.
	CallbackURL string `yaml:"callback_url"`
	// CallbackSecret is the HMAC-SHA256 key of its signatures, a
	// ${ENV_VAR} reference (required with callback_url).
	CallbackSecret string `yaml:"callback_secret"`
}

// QuotasSpec bounds one principal (SPEC §3 guarantee 10); unset fields
// take the defaults (approval.DefaultQuotas; requests_per_minute defaults
// to settings.api_rate).
type QuotasSpec struct {
	MaxDrafts         int      `yaml:"max_drafts"`
	MaxPending        int      `yaml:"max_pending"`
	MaxStoredBytes    ByteSize `yaml:"max_stored_bytes"`
	RequestsPerMinute int      `yaml:"requests_per_minute"`
	SendsPerMinute    int      `yaml:"sends_per_minute"`
}

// validateCallback checks a principal's status webhook. Errors never
// repeat the URL or the secret.
func (f *File) validateCallback(i int, p PrincipalSpec, bad func(string, ...any)) {
	switch {
	case p.CallbackURL == "" && p.CallbackSecret != "":
		bad("principals[%d] %s: callback_secret is set but callback_url is not", i, p.ID)
	case p.CallbackURL == "":
	case envRef.MatchString(p.CallbackURL):
		bad("principals[%d] %s: callback_url cannot use ${ENV_VAR} references", i, p.ID)
	default:
		if err := netguard.CheckCallbackURL(p.CallbackURL); err != nil {
			bad("principals[%d] %s: callback_url %v", i, p.ID, err)
		}
		if p.CallbackSecret == "" {
			bad("principals[%d] %s: callback_url needs callback_secret: \"${ENV_VAR}\" (the key its events are signed with)", i, p.ID)
		} else if !envRef.MatchString(p.CallbackSecret) {
			bad("principals[%d] %s: callback_secret must be a ${ENV_VAR} reference, never a literal", i, p.ID)
		}
	}
}

// validatePrincipals checks the principals (their scopes against the
// registered actions) and returns their ids.
func (f *File) validatePrincipals(bad func(string, ...any), approvers map[string]bool) map[string]bool {
	principals := map[string]bool{}
	for i, p := range f.Principals {
		uniqueID(bad, "principals", i, p.ID, principals)
		if !hexPattern.MatchString(p.APIKeySHA256) {
			bad("principals[%d] %s: api_key_sha256 must be 64 lowercase hex digits (countersign keygen prints it)", i, p.ID)
		}
		for _, s := range p.Scopes {
			if handled, err := f.checkMCPScope(s); handled {
				if err != nil {
					bad("principals[%d] %s: %v", i, p.ID, err)
				}
				continue
			}
			base, target, _ := strings.Cut(s, ":")
			if s != "*" && !slices.Contains(knownActions, base) {
				bad("principals[%d] %s: unknown scope %q (scopes: %s)", i, p.ID, s, strings.Join(scopeNames, ", "))
			}
			if target != "" && onTargets(base) && !f.hasTarget(target) {
				bad("principals[%d] %s: scope %q names no configured target", i, p.ID, s)
			}
		}
		if p.OnBehalfOf != "" && !approvers[p.OnBehalfOf] {
			bad("principals[%d] %s: on_behalf_of %q is not an approver id", i, p.ID, p.OnBehalfOf)
		}
		f.validateCallback(i, p, bad)
		if q := p.Quotas; q.MaxDrafts < 0 || q.MaxPending < 0 || q.MaxStoredBytes < 0 || q.RequestsPerMinute < 0 || q.SendsPerMinute < 0 {
			bad("principals[%d] %s: quotas must not be negative", i, p.ID)
		}
	}
	return principals
}
