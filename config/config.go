// Package config reads the YAML policy file (COUNTERSIGN_CONFIG) into the
// domain's policy and the settings of actions and channels. Secrets are
// never literals in the file: values that carry credentials are written as
// ${ENV_VAR} and resolved from the environment at load time.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/netguard"
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
	Webhooks   []WebhookSpec   `yaml:"webhooks"`
	Settings   SettingsSpec    `yaml:"settings"`
	// OIDC turns on sign-in to the approver inbox and the operator
	// console (config/oidc.go).
	OIDC *OIDCSpec `yaml:"oidc"`
}

// LimitsSpec holds per-action limits.
type LimitsSpec struct {
	Email EmailLimits `yaml:"email.send"`
}

// EmailLimits bound email.send.
type EmailLimits struct {
	MaxRecipients  int      `yaml:"max_recipients"`
	AllowedDomains []string `yaml:"allowed_domains"`
	// InternalDomains are the organisation's own domains; recipients
	// elsewhere are counted in the route attribute external_recipients.
	InternalDomains []string `yaml:"internal_domains"`
	// MaxAttachments (default 5, at most 20) and MaxAttachmentBytes
	// (decoded, all files of one email together; default 5MiB, at most
	// 20MiB) bound attachments. The request body limit bounds them first.
	MaxAttachments     int      `yaml:"max_attachments"`
	MaxAttachmentBytes ByteSize `yaml:"max_attachment_bytes"`
}

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

// ByteSize accepts a number of bytes or one with a unit: "512KiB", "32MiB", "1GiB", "64KB".
type ByteSize int64

// UnmarshalYAML parses a byte size.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = ByteSize(v)
	return nil
}

// ParseByteSize parses "1048576", "512KiB", "32MiB", "1GiB" (KB/MB/GB are
// powers of 1000).
func ParseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range units {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("invalid size %q (use e.g. 65536, 512KiB, 32MiB)", s)
	}
	return n * mult, nil
}

// OperatorSpec is someone who may use the admin API and `countersign ops`.
type OperatorSpec struct {
	ID           string `yaml:"id"`
	APIKeySHA256 string `yaml:"api_key_sha256"`
	// Email and OIDCSubject name the operator at console sign-in (oidc:).
	Email       string `yaml:"email"`
	OIDCSubject string `yaml:"oidc_subject"`
}

// ApproverSpec is a human.
type ApproverSpec struct {
	ID          string `yaml:"id"`
	Name        string `yaml:"name"`
	Email       string `yaml:"email"`
	SlackUserID string `yaml:"slack_user_id"`
	// TeamsUserID is the person in Microsoft Teams: their Teams user id
	// ("29:…", as the bot sees it) or their Entra object id (a GUID).
	TeamsUserID string   `yaml:"teams_user_id"`
	Groups      []string `yaml:"groups"`
	// TimeZone (IANA, e.g. Europe/Berlin) shows this approver times in
	// their own zone beside UTC on the approval page.
	TimeZone string `yaml:"time_zone"`
	// OIDCSubject names this approver at inbox sign-in when oidc.claim is
	// not email.
	OIDCSubject string `yaml:"oidc_subject"`
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
	// Remind re-notifies the approvers who have not decided, after each
	// interval from the send: [30m, 2h].
	Remind []Duration `yaml:"remind"`
	// Escalate adds approvers once when nobody decided in time.
	Escalate *EscalateSpec `yaml:"escalate"`
	// AllowEdit: true, or {editor_approves: true} to count the editor's
	// approval for the new version.
	AllowEdit EditSpec `yaml:"allow_edit"`
	// Allowances: "allow" lets allowances approve this route's
	// irreversible actions too; "never" (the default) does not.
	Allowances string `yaml:"allowances"`
	// StepUp "passkey": deciding needs a passkey assertion (SPEC §11).
	StepUp string `yaml:"step_up"`
}

// EscalateSpec is {after: 1h, approvers: {groups: [leads]}}.
type EscalateSpec struct {
	After     Duration `yaml:"after"`
	Approvers Who      `yaml:"approvers"`
}

// EditSpec is allow_edit: a bool, or {editor_approves: bool}.
type EditSpec struct {
	Allowed        bool
	EditorApproves bool
}

// UnmarshalYAML reads true/false or {editor_approves: true}.
func (e *EditSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&e.Allowed)
	}
	var m struct {
		EditorApproves bool `yaml:"editor_approves"`
	}
	if err := n.Decode(&m); err != nil {
		return fmt.Errorf("line %d: allow_edit is true, false or {editor_approves: true}", n.Line)
	}
	e.Allowed, e.EditorApproves = true, m.EditorApproves
	return nil
}

// MatchSpec selects operations. Every field set must match; when lists
// conditions on the attributes the action reports, all of which must hold
// (see docs/http-targets.md for the attributes and operators).
type MatchSpec struct {
	Action    string            `yaml:"action"`
	Principal string            `yaml:"principal"`
	Target    string            `yaml:"target"`
	Tool      string            `yaml:"tool"`
	Attrs     map[string]string `yaml:"attrs"`
	When      []CondSpec        `yaml:"when"`
}

// CondSpec is one route condition as written: an attribute and exactly one
// operator, e.g. {attr: body.amount, gt: 1000} or {attr: method, in: [PUT, DELETE]}.
type CondSpec struct {
	Attr    string   `yaml:"attr"`
	Eq      *string  `yaml:"eq"`
	Ne      *string  `yaml:"ne"`
	In      []string `yaml:"in"`
	NotIn   []string `yaml:"not_in"`
	Gt      *float64 `yaml:"gt"`
	Gte     *float64 `yaml:"gte"`
	Lt      *float64 `yaml:"lt"`
	Lte     *float64 `yaml:"lte"`
	Present *bool    `yaml:"present"`
	Matches *string  `yaml:"matches"`
}

// Condition turns the written form into the domain's condition. Returns an
// error unless exactly one operator is given and it is well formed.
func (c CondSpec) Condition() (approval.Condition, error) {
	attr, err := approval.AttrName(c.Attr) // a JSON Pointer is read as its dotted name
	if err != nil {
		return approval.Condition{}, err
	}
	var out []approval.Condition
	add := func(op approval.CondOp, values []string, n float64) {
		out = append(out, approval.Condition{Attr: attr, Op: op, Values: values, Number: n})
	}
	if c.Eq != nil {
		add(approval.OpEq, []string{*c.Eq}, 0)
	}
	if c.Ne != nil {
		add(approval.OpNe, []string{*c.Ne}, 0)
	}
	if c.In != nil {
		add(approval.OpIn, c.In, 0)
	}
	if c.NotIn != nil {
		add(approval.OpNotIn, c.NotIn, 0)
	}
	for _, x := range []struct {
		op approval.CondOp
		v  *float64
	}{{approval.OpGt, c.Gt}, {approval.OpGte, c.Gte}, {approval.OpLt, c.Lt}, {approval.OpLte, c.Lte}} {
		if x.v != nil {
			add(x.op, nil, *x.v)
		}
	}
	if c.Present != nil {
		if *c.Present {
			add(approval.OpPresent, nil, 0)
		} else {
			add(approval.OpAbsent, nil, 0)
		}
	}
	if c.Matches != nil {
		add(approval.OpMatches, []string{*c.Matches}, 0)
	}
	if len(out) != 1 {
		return approval.Condition{}, fmt.Errorf("condition on %q must have exactly one operator (eq, ne, in, not_in, gt, gte, lt, lte, present, matches), has %d", c.Attr, len(out))
	}
	if err := out[0].Validate(); err != nil {
		return approval.Condition{}, err
	}
	return out[0], nil
}

// Who names approvers by id and by group.
type Who struct {
	IDs    []string `yaml:"ids"`
	Groups []string `yaml:"groups"`
}

// TargetSpec is an HTTP target for http.request (docs/http-targets.md).
type TargetSpec struct {
	Name    string `yaml:"name"`
	BaseURL string `yaml:"base_url"`
	// Headers are sent with every request to the target. Values carrying
	// credentials are ${ENV_VAR} references; the agent never sees them.
	Headers map[string]string `yaml:"headers"`
	Allow   []AllowSpec       `yaml:"allow"`
	State   StateSpec         `yaml:"state"`
	// AllowPrivate lets the target resolve to loopback or private
	// addresses (internal APIs, tests); off, such addresses are refused.
	AllowPrivate *bool `yaml:"allow_private"`
	// Timeout bounds each request to the target (default 15s, 1s–2m).
	Timeout Duration `yaml:"timeout"`
	// MaxBodyBytes caps the JSON body an agent may send (default 64 KiB,
	// at most 1 MiB).
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// Retry opts in to resending a write the target refused with 429 or
	// 503, with the same Idempotency-Key: for targets that dedupe by it.
	// The one exception to "never retried automatically"
	// (docs/http-targets.md).
	Retry *RetrySpec `yaml:"retry"`
}

// RetrySpec is a target's bounded retry: on lists the statuses (429, 503),
// max the further attempts (1–5).
type RetrySpec struct {
	On  []int `yaml:"on"`
	Max int   `yaml:"max"`
}

// AllowSpec is one allowed method and path pattern. In a pattern, "*" is
// exactly one path segment and a final "**" one or more; everything else
// matches literally.
type AllowSpec struct {
	Method string `yaml:"method"`
	Path   string `yaml:"path"`
	// Query lists the query parameter names the rule accepts; any other
	// parameter is refused (query_not_allowed). Empty: no query at all.
	Query []string `yaml:"query"`
}

// StateSpec lists the fields of the target's resource an operation binds
// to (dotted paths for nested fields, e.g. "time.start"). They are read by
// GET on the write's own path, together with every field the write sets.
type StateSpec struct {
	Fields []string `yaml:"fields"`
	// Read: false turns the GET off for targets whose write paths cannot be
	// read; their writes are then not bound to state (the preview says so).
	Read *bool `yaml:"read"`
}

// Private reports whether the target may resolve to private addresses.
func (t TargetSpec) Private() bool { return t.AllowPrivate != nil && *t.AllowPrivate }

// Reads reports whether writes to the target are bound to state.
func (t TargetSpec) Reads() bool { return t.State.Read == nil || *t.State.Read }

// ResolveHeaders expands the ${ENV_VAR} references of the target's
// headers. A reference to an unset variable is an error naming the header
// and the variable, never a value.
func (t TargetSpec) ResolveHeaders(lookup func(string) (string, bool)) (map[string]string, error) {
	out := make(map[string]string, len(t.Headers))
	for _, k := range slices.Sorted(maps.Keys(t.Headers)) {
		v, err := Expand(t.Headers[k], lookup)
		if err != nil {
			return nil, fmt.Errorf("target %s: header %s: %w", t.Name, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// Methods a target may allow: http.request is for writes (a read needs no
// approval).
var targetMethods = []string{"POST", "PUT", "PATCH", "DELETE"}

// Headers countersign sets itself, or that would change how a request is
// framed or routed; a target may not set them.
var reservedHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "te", "trailer",
	"upgrade", "if-match", "if-none-match", "if-unmodified-since", "idempotency-key", "expect", "countersign-receipt"}

// credentialHeader reports whether a header name suggests a credential,
// whose value must then come from the environment.
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	if n == "authorization" || n == "proxy-authorization" || n == "cookie" {
		return true
	}
	for _, w := range []string{"auth", "token", "key", "secret", "password", "signature", "session"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

var (
	headerName   = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`)
	fieldPattern = regexp.MustCompile(`^[^.\s]+(\.[^.\s]+)*$`)
	// queryParamName is httpreq's rule for query parameter names.
	queryParamName = regexp.MustCompile(`^[A-Za-z0-9_.\-\[\]]{1,128}$`)
)

func (f *File) validateTargets(bad func(string, ...any)) {
	seen := map[string]bool{}
	for i, t := range f.Targets {
		name := t.Name
		if !idPattern.MatchString(t.Name) {
			bad("targets[%d]: name %q must be lowercase letters, digits, '_', '.', '-'", i, t.Name)
			name = fmt.Sprintf("targets[%d]", i)
		}
		if seen[t.Name] {
			bad("targets[%d]: duplicate name %q", i, t.Name)
		}
		seen[t.Name] = true
		u, err := url.Parse(t.BaseURL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
			bad("target %s: base_url %q must be an absolute http(s) URL", name, t.BaseURL)
		case u.User != nil:
			bad("target %s: base_url must not carry credentials; put them in headers as ${ENV_VAR}", name)
		case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(t.BaseURL, "?"):
			bad("target %s: base_url must not have a query or fragment (credentials in URLs end up in logs; use headers)", name)
		case u.Scheme == "http" && !t.Private():
			bad("target %s: base_url must be https (plain http is allowed only with allow_private: true, for internal targets)", name)
		case envRef.MatchString(t.BaseURL):
			bad("target %s: base_url cannot use ${ENV_VAR} references", name)
		}
		for _, k := range slices.Sorted(maps.Keys(t.Headers)) {
			v := t.Headers[k]
			if !headerName.MatchString(k) {
				bad("target %s: %q is not a header name", name, k)
			}
			if slices.Contains(reservedHeaders, strings.ToLower(k)) {
				bad("target %s: header %s is set by countersign and cannot be configured", name, k)
			}
			if credentialHeader(k) && !envRef.MatchString(v) {
				bad("target %s: header %s looks like a credential; its value must be a ${ENV_VAR} reference, never a literal", name, k)
			}
			if strings.ContainsAny(v, "\r\n") {
				bad("target %s: header %s has a line break", name, k)
			}
		}
		if len(t.Allow) == 0 {
			bad("target %s: allow must list at least one {method, path}", name)
		}
		for j, a := range t.Allow {
			if !slices.Contains(targetMethods, a.Method) {
				bad("target %s: allow[%d]: method %q must be one of %s", name, j, a.Method, strings.Join(targetMethods, ", "))
			}
			if err := CheckPathPattern(a.Path); err != nil {
				bad("target %s: allow[%d]: %v", name, j, err)
			}
			for k, q := range a.Query {
				if !queryParamName.MatchString(q) {
					bad("target %s: allow[%d]: query parameter name %q must be 1-128 of letters, digits and _ . - [ ]", name, j, q)
				}
				if slices.Contains(a.Query[:k], q) {
					bad("target %s: allow[%d]: query parameter %q is listed twice", name, j, q)
				}
			}
		}
		fields := map[string]bool{}
		for _, fl := range t.State.Fields {
			if !fieldPattern.MatchString(fl) {
				bad("target %s: state field %q must be a name or a dotted path (time.start)", name, fl)
			}
			if fields[fl] {
				bad("target %s: state field %q is listed twice", name, fl)
			}
			fields[fl] = true
		}
		if d := time.Duration(t.Timeout); d != 0 && (d < time.Second || d > 2*time.Minute) {
			bad("target %s: timeout %s must be between 1s and 2m", name, d)
		}
		if t.MaxBodyBytes < 0 || t.MaxBodyBytes > 1<<20 {
			bad("target %s: max_body_bytes must be between 1 and 1048576", name)
		}
		if r := t.Retry; r != nil {
			if len(r.On) == 0 {
				bad("target %s: retry.on must list the statuses to retry (429, 503)", name)
			}
			for k, c := range r.On {
				if c != 429 && c != 503 {
					bad("target %s: retry.on: %d cannot be retried (only 429 and 503, which say the target applied nothing; after 502 or 504 the write may have reached it)", name, c)
				}
				if slices.Contains(r.On[:k], c) {
					bad("target %s: retry.on: %d is listed twice", name, c)
				}
			}
			if r.Max < 1 || r.Max > 5 {
				bad("target %s: retry.max must be between 1 and 5", name)
			}
		}
	}
}

// CheckPathPattern validates an allow-list path pattern: it starts with
// "/", has no empty segments (except a trailing slash), no "." or ".."
// segments and no query; "*" stands for one whole segment and "**", only
// as the last segment, for one or more.
func CheckPathPattern(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path pattern %q must start with /", p)
	}
	if strings.ContainsAny(p, "?#\\%@") {
		return fmt.Errorf("path pattern %q may not contain ?, #, \\, %% or @", p)
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch {
		case s == "" && !(last && i > 0):
			return fmt.Errorf("path pattern %q has an empty segment", p)
		case s == "." || s == "..":
			return fmt.Errorf("path pattern %q has a %q segment", p, s)
		case s == "**" && !last:
			return fmt.Errorf("path pattern %q: ** may only be the last segment", p)
		case s != "*" && s != "**" && strings.Contains(s, "*"):
			return fmt.Errorf("path pattern %q: * stands for a whole segment (/events/*), not part of one", p)
		}
		for _, r := range s {
			if r < 0x21 || r == 0x7f {
				return fmt.Errorf("path pattern %q has a space or control character", p)
			}
		}
	}
	return nil
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
	DraftTTL Duration `yaml:"draft_ttl"`
	// DraftRetention is how long a draft that ended unsent is kept (default 1h).
	DraftRetention Duration `yaml:"draft_retention"`
	// APIRate is the default requests per minute of every principal
	// (default 600; quotas.requests_per_minute overrides it).
	APIRate   int      `yaml:"api_rate"`
	Retention Duration `yaml:"retention"`
	// EmailFrom is the sender of email.send, the agents' mail (default: the
	// SMTP URL's from).
	EmailFrom string `yaml:"email_from"`
	// MaxRequestBytes caps the body of a REST request (default 256KiB,
	// between 64KiB and 16MiB); /mcp takes 1MiB or this and 64KiB more,
	// whichever is larger. Attachments of email.send travel in it, base64
	// encoded (a third larger than the files).
	MaxRequestBytes ByteSize `yaml:"max_request_bytes"`
	// NotifyFrom is the sender of countersign's own mail, the approval
	// requests (default: the SMTP URL's from). It never is EmailFrom: an
	// approval request must not arrive from the requester.
	NotifyFrom string `yaml:"notify_from"`
	// Shards is how many Redis shards the data and work queue are spread
	// over (default 16). It is fixed for a deployment when it first starts.
	Shards int `yaml:"shards"`
	// ExecutionLease is how long an execution's claim holds without its
	// executor renewing it (default 15s, 2s–5m): a paused or cut-off
	// executor is fenced once it passed, and only then may an operator
	// settle its operation as succeeded or failed.
	ExecutionLease Duration `yaml:"execution_lease"`
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
	knownActions = []string{"email.send", "slack.post_message", "slack.delete_message", "http.request", "allowance.grant", "host.tool_call"}
)

// ValidID reports whether s is a valid id of principals, operators,
// approvers and targets.
func ValidID(s string) bool { return idPattern.MatchString(s) }

func (f *File) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// uniqueID checks the id of the i-th entry of a list and records it.
	uniqueID := func(list string, i int, id string, seen map[string]bool) {
		if !idPattern.MatchString(id) {
			bad("%s[%d]: id %q must be lowercase letters, digits, '_', '.', '-'", list, i, id)
		}
		if seen[id] {
			bad("%s[%d]: duplicate id %q", list, i, id)
		}
		seen[id] = true
	}
	approvers := map[string]bool{}
	groups := map[string]bool{}
	for i, a := range f.Approvers {
		uniqueID("approvers", i, a.ID, approvers)
		for _, g := range a.Groups {
			groups[g] = true
		}
		if a.TimeZone != "" {
			if _, err := time.LoadLocation(a.TimeZone); err != nil || a.TimeZone == "Local" {
				bad("approvers[%d] %s: time_zone %q is not an IANA time zone such as Europe/Berlin", i, a.ID, a.TimeZone)
			}
		}
		if a.Email != "" && !strings.Contains(a.Email, "@") {
			bad("approvers[%d] %s: email %q is not an address", i, a.ID, a.Email)
		}
		if a.TeamsUserID != "" && !teamsUserID.MatchString(a.TeamsUserID) {
			bad("approvers[%d] %s: teams_user_id %q must be a Teams user id (29:…) or an Entra object id (a GUID)", i, a.ID, a.TeamsUserID)
		}
	}
	principals := map[string]bool{}
	for i, p := range f.Principals {
		uniqueID("principals", i, p.ID, principals)
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
		f.validateCallback(i, p, bad)
		if q := p.Quotas; q.MaxDrafts < 0 || q.MaxPending < 0 || q.MaxStoredBytes < 0 || q.RequestsPerMinute < 0 || q.SendsPerMinute < 0 {
			bad("principals[%d] %s: quotas must not be negative", i, p.ID)
		}
	}
	f.validateOperators(bad)
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
		if r.Match.Target != "" && r.Match.Action != "" && r.Match.Action != "http.request" {
			bad("%s: match.target applies to http.request, not %s", name, r.Match.Action)
		}
		if r.Match.Tool != "" && r.Match.Action != "" && r.Match.Action != "host.tool_call" {
			bad("%s: match.tool applies to host.tool_call, not %s", name, r.Match.Action)
		}
		for j, c := range r.Match.When {
			if _, err := c.Condition(); err != nil {
				bad("%s: match.when[%d]: %v", name, j, err)
			}
		}
		seenAttr := map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(r.Match.Attrs)) {
			n, err := approval.AttrName(k)
			switch {
			case err != nil:
				bad("%s: match.attrs: %v", name, err)
			case seenAttr[n] != "":
				bad("%s: match.attrs: %q and %q name the same attribute", name, seenAttr[n], k)
			default:
				seenAttr[n] = k
			}
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
		ttl := time.Duration(r.ApprovalTTL)
		if ttl == 0 {
			ttl = approval.DefaultApprovalTTL
		}
		for j, d := range r.Remind {
			if time.Duration(d) <= 0 || time.Duration(d) >= ttl || (j > 0 && d <= r.Remind[j-1]) {
				bad("%s: remind must be increasing intervals within the approval window (%s): %s", name, ttl, time.Duration(d))
			}
		}
		if len(r.Remind) > 10 {
			bad("%s: remind lists at most 10 reminders", name)
		}
		if e := r.Escalate; e != nil {
			if time.Duration(e.After) <= 0 || time.Duration(e.After) >= ttl {
				bad("%s: escalate.after must be within the approval window (%s)", name, ttl)
			}
			if len(e.Approvers.IDs)+len(e.Approvers.Groups) == 0 {
				bad("%s: escalate.approvers must name ids or groups", name)
			}
			for _, id := range e.Approvers.IDs {
				if !approvers[id] {
					bad("%s: escalate: approver %q is not defined", name, id)
				}
			}
			for _, g := range e.Approvers.Groups {
				if !groups[g] {
					bad("%s: escalate: no approver is in group %q", name, g)
				}
			}
		}
		if r.Allowances != "" && r.Allowances != "allow" && r.Allowances != "never" {
			bad("%s: allowances is allow or never, not %q", name, r.Allowances)
		}
		for _, n := range r.Notify {
			if err := checkNotify(n, webhooks); err != nil {
				bad("%s: %v", name, err)
			}
		}
		if r.StepUp != "" && r.StepUp != approval.StepUpPasskey {
			bad("%s: step_up %q must be passkey (or left out)", name, r.StepUp)
		}
	}
	f.validateOIDC(bad)
	f.validateTargets(bad)
	if d := time.Duration(f.Settings.DraftTTL); d != 0 && (d < approval.MinDraftTTL || d > approval.MaxDraftTTL) {
		bad("settings: draft_ttl %s must be between 1m and 60m", d)
	}
	if d := time.Duration(f.Settings.DraftRetention); d != 0 && (d < time.Minute || d > 7*24*time.Hour) {
		bad("settings: draft_retention %s must be between 1m and 7d", d)
	}
	if d := time.Duration(f.Settings.ExecutionLease); d != 0 && (d < approval.MinExecutionLease || d > approval.MaxExecutionLease) {
		bad("settings: execution_lease %s must be between 2s and 5m", d)
	}
	if n := f.Settings.Shards; n < 0 || n > 1024 {
		bad("settings: shards must be between 1 and 1024")
	}
	if f.Settings.APIRate < 0 {
		bad("settings: api_rate must not be negative")
	}
	if n := f.Settings.MaxRequestBytes; n != 0 && (n < 64<<10 || n > 16<<20) {
		bad("settings: max_request_bytes must be between 64KiB and 16MiB")
	}
	for name, v := range map[string]string{"email_from": f.Settings.EmailFrom, "notify_from": f.Settings.NotifyFrom} {
		if _, err := mail.ParseAddress(v); v != "" && err != nil {
			bad("settings: %s %q is not an email address (write \"Name <addr@example.com>\" or addr@example.com)", name, v)
		}
	}
	if l := f.Limits.Email; l.MaxAttachments < 0 || l.MaxAttachments > 20 || l.MaxAttachmentBytes < 0 || l.MaxAttachmentBytes > 20<<20 {
		bad("limits: email.send: max_attachments must be 0-20 and max_attachment_bytes at most 20MiB")
	}
	return errors.Join(errs...)
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

func (f *File) hasTarget(name string) bool {
	for _, t := range f.Targets {
		if t.Name == name {
			return true
		}
	}
	return false
}

var (
	// teamsChannelID is a Teams channel's conversation id: 19:…@thread.tacv2.
	teamsChannelID = regexp.MustCompile(`^19:[A-Za-z0-9._=-]+@thread\.[a-z0-9]+$`)
	teamsUserID    = regexp.MustCompile(`^(29:[A-Za-z0-9._=+/-]{1,200}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$`)
)

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
	case "teams":
		if target != "" && !teamsChannelID.MatchString(target) {
			return fmt.Errorf("notify %q: use teams (each approver's chat) or teams:19:…@thread.tacv2 (a channel's id)", n)
		}
	case "webhook":
		if !webhooks[target] {
			return fmt.Errorf("notify %q: no webhook named %q", n, target)
		}
	default:
		return fmt.Errorf("notify %q: unknown channel (email, console, slack:…, teams, teams:…, webhook:…)", n)
	}
	return nil
}

// Policy builds the domain policy.
func (f *File) Policy() *approval.Policy {
	p := &approval.Policy{}
	for _, a := range f.Approvers {
		p.Approvers = append(p.Approvers, &approval.Approver{ID: a.ID, Name: a.Name, Email: a.Email,
			SlackUserID: a.SlackUserID, TeamsUserID: a.TeamsUserID, Groups: a.Groups, TimeZone: a.TimeZone, OIDCSubject: a.OIDCSubject})
	}
	for _, pr := range f.Principals {
		q := pr.Quotas
		p.Principals = append(p.Principals, &approval.Principal{ID: pr.ID, KeyHash: pr.APIKeySHA256,
			Scopes: pr.Scopes, OnBehalfOf: pr.OnBehalfOf, Quotas: approval.Quotas{
				MaxDrafts: q.MaxDrafts, MaxPending: q.MaxPending, MaxStoredBytes: int64(q.MaxStoredBytes),
				RequestsPerMinute: cmp.Or(q.RequestsPerMinute, f.Settings.APIRate), SendsPerMinute: q.SendsPerMinute}})
	}
	for _, o := range f.Operators {
		p.Operators = append(p.Operators, &approval.Operator{ID: o.ID, KeyHash: o.APIKeySHA256, Email: o.Email, OIDCSubject: o.OIDCSubject})
	}
	for _, r := range f.Routes {
		m := approval.Match{Action: r.Match.Action, Principal: r.Match.Principal, Target: r.Match.Target, Tool: r.Match.Tool}
		if len(r.Match.Attrs) > 0 {
			m.Attrs = map[string]string{}
			for k, v := range r.Match.Attrs {
				name, _ := approval.AttrName(k) // validated by Parse
				m.Attrs[name] = v
			}
		}
		for _, c := range r.Match.When {
			if cond, err := c.Condition(); err == nil { // validated by Parse
				m.When = append(m.When, cond)
			}
		}
		p.Routes = append(p.Routes, approval.RouteRule{
			Name: r.Name, Match: m,
			ApproverIDs: r.Approvers.IDs, ApproverGroups: r.Approvers.Groups, Required: r.Required,
			Notify: r.Notify, ApprovalTTL: time.Duration(r.ApprovalTTL), ForbidSelfApproval: r.ForbidSelfApproval,
			Remind: durations(r.Remind), AllowEdit: r.AllowEdit.Allowed, EditorApproves: r.AllowEdit.EditorApproves,
			Allowances: r.Allowances == "allow",
			StepUp:     r.StepUp,
		})
		if e := r.Escalate; e != nil {
			rule := &p.Routes[len(p.Routes)-1]
			rule.Escalate = &approval.EscalateRule{After: time.Duration(e.After), ApproverIDs: e.Approvers.IDs, ApproverGroups: e.Approvers.Groups}
		}
	}
	if f.OIDC != nil {
		p.SignInClaim = f.OIDC.ClaimName()
	}
	return p
}

func durations(ds []Duration) []time.Duration {
	var out []time.Duration
	for _, d := range ds {
		out = append(out, time.Duration(d))
	}
	return out
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
