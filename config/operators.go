package config

// OperatorSpec is someone who may use the admin API and `countersign ops`.
type OperatorSpec struct {
	ID           string `yaml:"id"`
	APIKeySHA256 string `yaml:"api_key_sha256"`
	// Email and OIDCSubject name the operator at console sign-in (oidc:).
	Email       string `yaml:"email"`
	OIDCSubject string `yaml:"oidc_subject"`
}

// validateOperators checks operators like principals, and that no key
// hash is shared: an operator key must never work on the agent API, nor an
// agent's key on the admin API.
func (f *File) validateOperators(bad func(string, ...any)) {
	seen := map[string]bool{}
	keys := map[string]string{}
	for _, p := range f.Principals {
		keys[p.APIKeySHA256] = "principal " + p.ID
	}
	for i, o := range f.Operators {
		if !idPattern.MatchString(o.ID) {
			bad("operators[%d]: id %q must be lowercase letters, digits, '_', '.', '-'", i, o.ID)
		}
		if seen[o.ID] {
			bad("operators[%d]: duplicate id %q", i, o.ID)
		}
		seen[o.ID] = true
		if !hexPattern.MatchString(o.APIKeySHA256) {
			bad("operators[%d] %s: api_key_sha256 must be 64 lowercase hex digits (countersign keygen --operator prints it)", i, o.ID)
			continue
		}
		if who, dup := keys[o.APIKeySHA256]; dup {
			bad("operators[%d] %s: api_key_sha256 is also the key of %s; give each its own key (countersign keygen --operator)", i, o.ID, who)
		}
		keys[o.APIKeySHA256] = "operator " + o.ID
	}
}
