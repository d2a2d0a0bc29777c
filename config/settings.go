package config

import (
	"net/mail"
	"time"

	"github.com/countersign/countersign/approval"
)

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

// validateSettings checks the service-wide settings.
func (f *File) validateSettings(bad func(string, ...any)) {
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
}
